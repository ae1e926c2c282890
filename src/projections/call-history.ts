/**
 * The call history (docs/calls.md): a projection of the log that remembers the recent calls, each
 * from its request to its end, bounded by count and by age. It is fed every event the router's
 * log folds (appended, read at start, followed by a standby), beside the cluster state and apart
 * from it: no decision reads it, so it is not in snapshots, and a router rebuilds it at start by
 * reading the tail of its log.
 *
 * Cost on the hot path: one Map lookup and a few field writes per call event, and one comparison
 * of times per event for the age bound (oldest first, so a pass costs what it forgets).
 */
import type { ClusterEvent, EventOf } from '../events/types.js';

/** Where a call is in its life, as the history tells it. */
export const CALL_STATES = [
  'queued',
  'placed',
  'running',
  'succeeded',
  'failed',
  'rejected',
  'expired',
] as const;
/** A call's state in the history. */
export type CallState = (typeof CALL_STATES)[number];

/** The states of a call that ended badly: what `--failed` lists. */
export const FAILED_STATES: ReadonlySet<CallState> = new Set(['failed', 'rejected', 'expired']);

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
  /** When an admission queue held it, and let it go (null: never queued). */
  readonly queuedAt: string | null;
  readonly admittedAt: string | null;
  readonly boundAt: string | null;
  /** The container and checkpoint its worker named when it bound (null before). */
  readonly boundContainerId: string | null;
  readonly boundCheckpointId: string | null;
  readonly finishedAt: string | null;
  /** From request to end, in ms (null while it runs). */
  readonly durationMs: number | null;
  /** The gRPC code's name it ended with (`OK` for success); null while it runs. */
  readonly code: string | null;
  readonly message: string | null;
  readonly retryAfterMs: number | null;
  readonly attempts: readonly CallAttempt[];
  /** The seq of the last event that told of it. */
  readonly lastSeq: number;
}

/** Which calls to list; every field narrows. */
export interface CallQuery {
  readonly tenantId?: string | null;
  /** Only calls requested at or after this instant (epoch ms). */
  readonly sinceMs?: number;
  readonly failed?: boolean;
  readonly function?: string;
  /** At most this many, newest first. */
  readonly limit?: number;
}

/** The history's bounds. */
export interface HistoryBounds {
  /** The most calls it holds; the oldest is forgotten first. */
  readonly maxCalls: number;
  /** How long a call is kept after its request, in ms. */
  readonly retentionMs: number;
}

/** What the history holds now and what it costs. */
export interface HistoryWindowView extends HistoryBounds {
  readonly calls: number;
  readonly oldestRequestedAt: string | null;
  /** An estimate of the heap the records hold, in bytes (bench/history.ts measures the real one). */
  readonly approxBytes: number;
}

/** A record as the history keeps it: mutable inside, read-only outside. */
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type Kept = Omit<Mutable<CallRecord>, 'attempts'> & {
  attempts: Mutable<CallAttempt>[];
  requestedMs: number;
};

/** How many forgotten records the history keeps for reuse. */
const SPARE_RECORDS = 256;

/** Heap an empty record costs (its object, its attempts array, map entry), by measurement. */
const RECORD_OVERHEAD_BYTES = 280;
/** Heap one attempt costs beyond its strings. */
const ATTEMPT_OVERHEAD_BYTES = 120;

/** The recent calls; see the module comment. Owned by its caller (the router's history feed). */
export class CallHistory {
  private readonly calls = new Map<string, Kept>();
  /**
   * The records in the order they were requested, from `head` on (a record no longer in `calls`,
   * replaced or forgotten, is skipped). A Map's own order is not walked: after many deletions V8
   * walks its deleted entries again on every new iteration, which cost 10 µs per call here.
   */
  private order: Kept[] = [];
  private head = 0;
  /**
   * Records the bounds forgot, kept for the next calls: a full history replaces one record per
   * call, and reusing it spares the collector a long-lived object per call (measured by
   * bench/history.ts). Only records behind `head` come here: no slot of `order` still names them.
   */
  private readonly spare: Kept[] = [];

  constructor(readonly bounds: HistoryBounds) {}

  /** How many calls it holds. */
  get size(): number {
    return this.calls.size;
  }

  /** Folds one event of the log. */
  observe(event: ClusterEvent): void {
    switch (event.type) {
      case 'CallRequested':
        this.requested(event);
        break;
      case 'CallPlaced':
        this.placed(event);
        break;
      case 'CallDialFailed':
        this.dialFailed(event);
        break;
      case 'CallRejected':
        this.rejected(event);
        break;
      case 'CallBound':
        this.bound(event);
        break;
      case 'CallFinished':
        this.finished(event);
        break;
      case 'ReservationExpired':
        this.expired(event);
        break;
      case 'SessionTurnRefused':
        this.turnRefused(event);
        break;
      default:
        break;
    }
  }

  /**
   * One call by request ID, or undefined when the history does not hold it. Records are the
   * history's and reused once forgotten: read them now, copy what you keep.
   */
  get(requestId: string): CallRecord | undefined {
    return this.calls.get(requestId);
  }

  /** The calls that pass `query`, newest first. */
  list(query: CallQuery = {}): CallRecord[] {
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    const out: CallRecord[] = [];
    for (let i = this.order.length - 1; i >= this.head && out.length < limit; i -= 1) {
      const record = this.order[i]!;
      if (this.calls.get(record.requestId) !== record) continue;
      if (query.sinceMs !== undefined && record.requestedMs < query.sinceMs) break;
      if (query.tenantId !== undefined && record.tenantId !== query.tenantId) continue;
      if (query.failed && !FAILED_STATES.has(record.state)) continue;
      if (query.function !== undefined && record.function !== query.function) continue;
      out.push(record);
    }
    return out;
  }

  /** What it holds and costs now (walks every record: for a query, not the hot path). */
  window(): HistoryWindowView {
    let approxBytes = 0;
    let oldest: Kept | undefined;
    for (let i = this.head; i < this.order.length; i += 1) {
      const record = this.order[i]!;
      if (this.calls.get(record.requestId) !== record) continue;
      oldest ??= record;
      approxBytes += approxRecordBytes(record);
    }
    return {
      ...this.bounds,
      calls: this.calls.size,
      oldestRequestedAt: oldest?.requestedAt ?? null,
      approxBytes,
    };
  }

  /**
   * Forgets what is older than the retention as of `at` (an event's time, or the shell's clock
   * before it answers a query), and the oldest past the count.
   */
  forgetDue(at: string): void {
    this.forgetBefore(Date.parse(at) - this.bounds.retentionMs);
  }

  /** Forgets the calls requested before `cutoff` (epoch ms), and the oldest past the count. */
  private forgetBefore(cutoff: number): void {
    while (this.head < this.order.length) {
      const record = this.order[this.head]!;
      const live = this.calls.get(record.requestId) === record;
      if (live && this.calls.size <= this.bounds.maxCalls && !(record.requestedMs < cutoff)) break;
      if (live) {
        this.calls.delete(record.requestId);
        if (this.spare.length < SPARE_RECORDS) this.spare.push(record);
      }
      this.head += 1;
    }
    // Give the forgotten front back now and then: amortized O(1) per call.
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }

  private requested(event: EventOf<'CallRequested'>): void {
    const previous = this.calls.get(event.requestId);
    if (previous) this.forget(previous);
    const record = this.spare.pop();
    const attempts = record?.attempts ?? [];
    attempts.length = 0;
    const fields: Kept = {
      requestId: event.requestId,
      tenantId: event.tenantId,
      function: event.function,
      sessionId: event.sessionId,
      retryOf: event.retryOf,
      memory: event.demand.memory,
      gpu: event.demand.gpu === true || (event.demand.gpuMemory ?? 0) > 0,
      state: 'placed',
      requestedAt: event.at,
      requestedMs: Date.parse(event.at),
      requestedSeq: event.seq,
      turnWaitMs: event.turnWaitMs,
      queuedAt: null,
      admittedAt: null,
      boundAt: null,
      boundContainerId: null,
      boundCheckpointId: null,
      finishedAt: null,
      durationMs: null,
      code: null,
      message: null,
      retryAfterMs: null,
      attempts,
      lastSeq: event.seq,
    };
    const kept = record === undefined ? fields : Object.assign(record, fields);
    this.calls.set(event.requestId, kept);
    this.order.push(kept);
    this.forgetBefore(kept.requestedMs - this.bounds.retentionMs);
  }

  /** A session call refused "session is busy": it never reached placement, so it starts here. */
  private turnRefused(event: EventOf<'SessionTurnRefused'>): void {
    const at = Date.parse(event.at);
    const record: Kept = {
      requestId: event.requestId,
      tenantId: event.tenantId,
      function: null,
      sessionId: event.sessionId,
      retryOf: null,
      memory: null,
      gpu: false,
      state: 'rejected',
      requestedAt: new Date(at - event.waitedMs).toISOString(),
      requestedMs: at - event.waitedMs,
      requestedSeq: event.seq,
      turnWaitMs: event.waitedMs,
      queuedAt: null,
      admittedAt: null,
      boundAt: null,
      boundContainerId: null,
      boundCheckpointId: null,
      finishedAt: event.at,
      durationMs: event.waitedMs,
      code: 'RESOURCE_EXHAUSTED',
      message: `session is busy: session ${event.sessionId} still had a call running (and ${event.ahead} waiting ahead) after ${event.waitedMs} ms`,
      retryAfterMs: null,
      attempts: [],
      lastSeq: event.seq,
    };
    const previous = this.calls.get(event.requestId);
    if (previous) this.forget(previous);
    this.calls.set(event.requestId, record);
    this.order.push(record);
    this.forgetBefore(at - this.bounds.retentionMs);
  }

  private placed(event: EventOf<'CallPlaced'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    const attempt: Mutable<CallAttempt> = {
      workerId: event.workerId,
      containerId: event.containerId,
      checkpointId: event.checkpointId,
      version: event.version,
      routingRevision: event.routingRevision,
      coldLoad: event.coldLoad === true,
      placedAt: event.at,
      placedSeq: event.seq,
      dialError: null,
      dialFailedAt: null,
    };
    record.attempts.push(attempt);
    record.state = 'placed';
    record.lastSeq = event.seq;
  }

  private dialFailed(event: EventOf<'CallDialFailed'>): void {
    const record = this.calls.get(event.requestId);
    const attempt = record?.attempts.at(-1);
    if (!record || !attempt) return;
    attempt.dialError = event.error;
    attempt.dialFailedAt = event.at;
    record.lastSeq = event.seq;
  }

  private rejected(event: EventOf<'CallRejected'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    record.state = 'rejected';
    record.code = event.code;
    record.message = event.message;
    record.retryAfterMs = event.retryAfterMs;
    this.end(record, event.at, event.seq);
  }

  private bound(event: EventOf<'CallBound'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    record.state = 'running';
    record.boundAt = event.at;
    record.boundContainerId = event.containerId;
    record.boundCheckpointId = event.checkpointId;
    record.lastSeq = event.seq;
  }

  private finished(event: EventOf<'CallFinished'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    // A force-released call that later ends keeps the end the reaper gave it, with the real code.
    record.state = event.ok ? 'succeeded' : 'failed';
    record.code = event.ok ? 'OK' : (event.code ?? 'UNKNOWN');
    record.message = event.message;
    this.end(record, event.at, event.seq);
  }

  private expired(event: EventOf<'ReservationExpired'>): void {
    const record = this.calls.get(event.requestId);
    if (!record || record.finishedAt !== null) return;
    record.state = 'expired';
    record.message =
      'the router released the call: its reservation was stale or in flight at a restart';
    this.end(record, event.at, event.seq);
  }

  private end(record: Kept, at: string, seq: number): void {
    record.finishedAt = at;
    record.durationMs = Math.max(0, Date.parse(at) - record.requestedMs);
    record.lastSeq = seq;
  }

  private forget(record: Kept): void {
    this.calls.delete(record.requestId);
  }
}

/** About the heap one record holds: its objects, and its strings at two bytes a character. */
function approxRecordBytes(record: CallRecord): number {
  let length =
    record.requestId.length +
    (record.tenantId?.length ?? 0) +
    (record.function?.length ?? 0) +
    (record.sessionId?.length ?? 0) +
    (record.retryOf?.length ?? 0) +
    (record.message?.length ?? 0);
  for (const attempt of record.attempts) {
    length +=
      attempt.workerId.length +
      (attempt.containerId?.length ?? 0) +
      (attempt.dialError?.length ?? 0);
  }
  return RECORD_OVERHEAD_BYTES + record.attempts.length * ATTEMPT_OVERHEAD_BYTES + length * 2;
}
