/**
 * A call's record in the call history (`call-history.ts`): what it tells of one call, the states
 * it can be in, and how the history keeps records (one shape for all, reused once forgotten,
 * their heap estimated). Pure.
 */
import type { Raised } from '../shared/raised.js';

/** Where a call is in its life, as the history tells it. */
export const CALL_STATES = [
  'queued',
  'placed',
  'running',
  'succeeded',
  'raised',
  'failed',
  'rejected',
  'expired',
] as const;
/** A call's state in the history. */
export type CallState = (typeof CALL_STATES)[number];

/**
 * The states of a call that ended badly: what `--failed` lists. A call whose function raised
 * (`raised`) ended OK at the gRPC level (its caller got the exception) but failed all the same.
 */
export const FAILED_STATES: ReadonlySet<CallState> = new Set([
  'raised',
  'failed',
  'rejected',
  'expired',
]);

/** One placement of a call: its first, or again after a failed dial. */
export interface CallAttempt {
  readonly workerId: string;
  readonly containerId: string | null;
  readonly checkpointId: string | null;
  readonly version: string | null;
  readonly routingRevision: number | null;
  readonly coldLoad: boolean;
  readonly placedAt: string;
  readonly placedSeq: number;
  /** Why the router could not open the call's stream to the worker; null when it could. */
  readonly dialError: string | null;
  readonly dialFailedAt: string | null;
}

/** A call as the history remembers it. */
export interface CallRecord {
  readonly requestId: string;
  readonly tenantId: string | null;
  readonly function: string | null;
  readonly sessionId: string | null;
  readonly retryOf: string | null;
  /** The memory budget as asked (null: the default). */
  readonly memory: number | null;
  readonly gpu: boolean;
  readonly state: CallState;
  readonly requestedAt: string;
  readonly requestedSeq: number;
  /** How long it waited for its session's turn before it was requested, ms (null: it did not). */
  readonly turnWaitMs: number | null;
  /** A batch of a map: how many inputs it carried (`CallRequested.inputs`); null: a plain call. */
  readonly inputs: number | null;
  /**
   * An OK batch: how many of its inputs raised (`CallFinished.inputsRaised`, at most `inputs`);
   * null for a plain call, a batch that runs or failed, or a worker that did not say.
   */
  readonly inputsRaised: number | null;
  /** When an admission queue held it, and let it go (null: never queued; not admitted). */
  readonly queuedAt: string | null;
  readonly admittedAt: string | null;
  /** Why it waited in the queue, as its `CallQueued` said (at most 256 characters); null: never queued. */
  readonly queuedWhy: string | null;
  /**
   * How long it waited in the queue, in ms: from `queuedAt` to its admission, or to its leaving the
   * queue unplaced; null while it waits, or never queued.
   */
  readonly queueWaitMs: number | null;
  readonly boundAt: string | null;
  /** The container and checkpoint its worker named when it bound (null before). */
  readonly boundContainerId: string | null;
  readonly boundCheckpointId: string | null;
  readonly finishedAt: string | null;
  /** From request to end, in ms (null while it runs). */
  readonly durationMs: number | null;
  /** The gRPC code's name it ended with (`OK` for success); null while it runs. */
  readonly code: string | null;
  /** Why it failed, or for a call whose function raised `raised TYPE: MESSAGE`; null otherwise. */
  readonly message: string | null;
  /** What its function raised (state `raised`); null when it returned, failed or runs. */
  readonly raised: Raised | null;
  readonly retryAfterMs: number | null;
  readonly attempts: readonly CallAttempt[];
  /** The seq of the last event that told of it. */
  readonly lastSeq: number;
}

/** A record as the history keeps it: mutable inside, read-only outside. */
export type Mutable<T> = { -readonly [K in keyof T]: T[K] };
export type Kept = Omit<Mutable<CallRecord>, 'attempts'> & {
  attempts: Mutable<CallAttempt>[];
  requestedMs: number;
  /** Whether `calls` names it: false once a newer call took its request ID, or it was forgotten. */
  live: boolean;
};

/** Heap an empty record costs (its object, its attempts array, map entry), by measurement. */
const RECORD_OVERHEAD_BYTES = 172;
/** Heap one attempt costs beyond its strings. */
const ATTEMPT_OVERHEAD_BYTES = 120;

/** Ends `record` at `at` (its time from request to end, parsed once here). */
export function end(record: Kept, at: string, seq: number): void {
  record.finishedAt = at;
  record.durationMs = Math.max(0, Date.parse(at) - record.requestedMs);
  record.lastSeq = seq;
}

/** A record's progress after its request, none yet: a new call's, also in a reused record. */
export function clearProgress(record: Kept): void {
  record.queuedAt = null;
  record.admittedAt = null;
  record.queuedWhy = null;
  record.queueWaitMs = null;
  record.boundAt = null;
  record.boundContainerId = null;
  record.boundCheckpointId = null;
  record.finishedAt = null;
  record.durationMs = null;
  record.code = null;
  record.message = null;
  record.raised = null;
  record.inputsRaised = null;
  record.retryAfterMs = null;
}

/**
 * A record with every field, in one order, so all records share one shape. Its attempts array
 * is made with room for one attempt (a literal of one, emptied): a first placement then fills it
 * without growing it (`[]` grows to 17 slots on its first push, which a reused record keeps).
 */
export function blankRecord(): Kept {
  const attempts: Mutable<CallAttempt>[] = [blankAttempt()];
  attempts.pop();
  return {
    requestId: '',
    tenantId: null,
    function: null,
    sessionId: null,
    retryOf: null,
    memory: null,
    gpu: false,
    state: 'placed',
    requestedAt: '',
    requestedSeq: 0,
    turnWaitMs: null,
    inputs: null,
    inputsRaised: null,
    queuedAt: null,
    admittedAt: null,
    queuedWhy: null,
    queueWaitMs: null,
    boundAt: null,
    boundContainerId: null,
    boundCheckpointId: null,
    finishedAt: null,
    durationMs: null,
    code: null,
    message: null,
    raised: null,
    retryAfterMs: null,
    attempts,
    lastSeq: 0,
    requestedMs: 0,
    live: false,
  };
}

/** An attempt with every field, in one order (see `blankRecord`). */
export function blankAttempt(): Mutable<CallAttempt> {
  return {
    workerId: '',
    containerId: null,
    checkpointId: null,
    version: null,
    routingRevision: null,
    coldLoad: false,
    placedAt: '',
    placedSeq: 0,
    dialError: null,
    dialFailedAt: null,
  };
}

/** About the heap one record holds: its objects, and its strings at two bytes a character. */
export function approxRecordBytes(record: CallRecord): number {
  let length =
    record.requestId.length +
    (record.tenantId?.length ?? 0) +
    (record.function?.length ?? 0) +
    (record.sessionId?.length ?? 0) +
    (record.retryOf?.length ?? 0) +
    (record.message?.length ?? 0) +
    (record.queuedWhy?.length ?? 0) +
    (record.raised === null ? 0 : record.raised.type.length + record.raised.message.length);
  for (const attempt of record.attempts) {
    length +=
      attempt.workerId.length +
      (attempt.containerId?.length ?? 0) +
      (attempt.dialError?.length ?? 0);
  }
  return RECORD_OVERHEAD_BYTES + record.attempts.length * ATTEMPT_OVERHEAD_BYTES + length * 2;
}
