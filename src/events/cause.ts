/**
 * What caused an append (`Cause`), and its text as every event of the append records it
 * (`cause`): the kind, then `:` and the subject for a kind that names one (`call:r1`,
 * `report:w1`, `reaper`). The kinds are `CAUSE_KINDS` in `schema.ts`; the text is the log's, so
 * old logs read the same and a `Cause` always writes the text it was read from.
 */
import type { CauseKind } from './schema.js';

/** What caused an append: one variant per kind of trigger, naming its subject. */
export type Cause =
  /**
   * The router starting over its log; a reaper pass; telling workers what to keep; moving a
   * segment of the log to the archive (or deleting an archive file past its retention).
   */
  | { readonly kind: 'start' | 'reaper' | 'routing' | 'archive' }
  /**
   * A call got its turn; its first answer; its end; a failed dial of it; its admission from the
   * queue; its leaving the queue unplaced.
   */
  | {
      readonly kind: 'call' | 'answer' | 'end' | 'dial' | 'admit' | 'leave';
      readonly requestId: string;
    }
  /** A worker's report; a health probe of it. */
  | { readonly kind: 'report' | 'probe'; readonly workerId: string }
  /** A client ended its session. */
  | { readonly kind: 'session'; readonly sessionId: string }
  /** An operator changed a tenant's pin. */
  | { readonly kind: 'admin'; readonly tenantId: string };

/** Compiles only while `Cause` has exactly the log's kinds (`CAUSE_KINDS`), no more, no fewer. */
type _SameKinds = True<
  [Cause['kind']] extends [CauseKind] ? ([CauseKind] extends [Cause['kind']] ? true : false) : false
>;
type True<T extends true> = T;

/** The subject a cause names, or undefined for a kind that names none. */
export function causeSubject(cause: Cause): string | undefined {
  switch (cause.kind) {
    case 'start':
    case 'reaper':
    case 'routing':
    case 'archive':
      return undefined;
    case 'call':
    case 'answer':
    case 'end':
    case 'dial':
    case 'admit':
    case 'leave':
      return cause.requestId;
    case 'report':
    case 'probe':
      return cause.workerId;
    case 'session':
      return cause.sessionId;
    case 'admin':
      return cause.tenantId;
  }
}

/** The text of a cause, as the log records it: its kind, and `:subject` for a kind that names one. */
export function causeText(cause: Cause): string {
  const subject = causeSubject(cause);
  return subject === undefined ? cause.kind : `${cause.kind}:${subject}`;
}

/**
 * The cause a log's text records, or null for none (an event written before events recorded
 * their cause, a `Snapshot`) and for a text that is not one: an unknown kind, a subject missing
 * or one given to a kind that names none. The subject is everything after the first `:`.
 */
export function parseCause(text: string | null): Cause | null {
  if (text === null) return null;
  const colon = text.indexOf(':');
  const kind = colon < 0 ? text : text.slice(0, colon);
  const subject = colon < 0 ? undefined : text.slice(colon + 1);
  const named = subject !== undefined && subject !== '';
  switch (kind) {
    case 'start':
    case 'reaper':
    case 'routing':
    case 'archive':
      return subject === undefined ? { kind } : null;
    case 'call':
    case 'answer':
    case 'end':
    case 'dial':
    case 'admit':
    case 'leave':
      return named ? { kind, requestId: subject } : null;
    case 'report':
    case 'probe':
      return named ? { kind, workerId: subject } : null;
    case 'session':
      return named ? { kind, sessionId: subject } : null;
    case 'admin':
      return named ? { kind, tenantId: subject } : null;
    default:
      return null;
  }
}
