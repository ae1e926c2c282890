/** Errors raised when a log cannot be read as the event vocabulary says. */

/** Where in a log a bad event sits: its seq when known, and its JSONL line when read from one. */
export interface EventLocation {
  readonly seq?: number | undefined;
  readonly line?: number | undefined;
}

function describeLocation(location: EventLocation): string {
  const parts: string[] = [];
  if (location.line !== undefined) parts.push(`line ${location.line}`);
  if (location.seq !== undefined) parts.push(`seq ${location.seq}`);
  return parts.length > 0 ? parts.join(', ') : 'event';
}

/**
 * An event that does not fit the vocabulary: unparseable, unknown type, missing or mistyped field,
 * or out of order. The message names the seq or line and the field.
 */
export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  readonly seq: number | undefined;
  readonly line: number | undefined;
  readonly field: string | undefined;

  constructor(location: EventLocation, field: string | undefined, problem: string) {
    super(
      `${describeLocation(location)}: ${field === undefined ? '' : `field "${field}": `}${problem}`,
    );
    this.seq = location.seq;
    this.line = location.line;
    this.field = field;
  }
}

/** A log (LMDB directory) that cannot be opened as asked: locked, missing, of a newer schema. */
export class EventLogError extends Error {
  override readonly name: string = 'EventLogError';
}

/** The log's writer lock is held by another live process: one writer per log. */
export class LogLockedError extends EventLogError {
  override readonly name = 'LogLockedError';
}

/**
 * An LMDB log with events missing: its seqs jump from `after` to `next`. The message names the
 * log, the missing seqs and what the operator can do.
 */
export class LogGapError extends EventLogError {
  override readonly name = 'LogGapError';

  constructor(
    readonly dir: string,
    readonly after: number,
    readonly next: number,
  ) {
    const missing =
      next - 1 === after + 1 ? `seq ${after + 1} is` : `seqs ${after + 1} to ${next - 1} are`;
    super(
      `event log ${dir} has a hole: ${missing} missing (seq ${after} is followed by ${next}), so it cannot be read past seq ${after}. ` +
        `To go on from what is whole: replay export ${dir} --to ${after} -o kept.jsonl, then replay import kept.jsonl NEW_DIR, and start the router with --log NEW_DIR (what follows the hole stays in ${dir}); or restore ${dir} from a backup`,
    );
  }
}
