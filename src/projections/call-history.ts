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
import { raisedLine } from '../shared/raised.js';
import { roughDuration } from '../shared/units.js';
import {
  approxRecordBytes,
  blankAttempt,
  blankRecord,
  clearProgress,
  end,
  FAILED_STATES,
  type CallAttempt,
  type CallRecord,
  type Kept,
  type Mutable,
} from './call-record.js';

export {
  CALL_STATES,
  FAILED_STATES,
  type CallAttempt,
  type CallRecord,
  type CallState,
} from './call-record.js';

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

/** The most characters of a queued call's reason the history keeps. */
const MAX_WHY_LENGTH = 256;

/** How many forgotten records, and their attempts, the history keeps for reuse. */
const SPARE_RECORDS = 256;

/**
 * The recent calls; see the module comment. Owned by its caller (the router's history feed).
 *
 * The hot path allocates nothing once the history is full: a new call takes a record (and its
 * placement an attempt) the bounds forgot, and every event writes fields of the record it names
 * in place. A record or attempt built per event outlives the collector's young generation (it is
 * kept for the next `maxCalls` calls), so each one cost a copy, a promotion and a share of a full
 * collection of the router's heap: measured by bench/history.ts, that was most of its cost.
 */
export class CallHistory {
  private readonly calls = new Map<string, Kept>();
  /**
   * The records in the order they were requested, from `head` on (a record no longer live,
   * replaced or forgotten, is skipped). A Map's own order is not walked: after many deletions V8
   * walks its deleted entries again on every new iteration, which cost 10 µs per call here.
   */
  private order: Kept[] = [];
  private head = 0;
  /**
   * Records the bounds forgot, kept for the next calls, and their attempts. Only records behind
   * `head` come here: no slot of `order` still names them.
   */
  private readonly spare: Kept[] = [];
  private readonly spareAttempts: Mutable<CallAttempt>[] = [];

  /**
   * A request that reuses the ID of another tenant's call the history holds, held back until the
   * event after it says whether placement refused it (`ALREADY_EXISTS`, in the same append):
   * refused, it is dropped and the owner's record stays as it was; placed (the router had
   * forgotten the ID), it replaces that record as any new call of the ID does.
   */
  private foreignReuse: EventOf<'CallRequested'> | null = null;

  constructor(readonly bounds: HistoryBounds) {}

  /** How many calls it holds. */
  get size(): number {
    return this.calls.size;
  }

  /** Folds one event of the log. */
  observe(event: ClusterEvent): void {
    const reuse = this.foreignReuse;
    if (reuse !== null) {
      this.foreignReuse = null;
      if (isRefusedReuse(reuse, event)) return;
      this.requested(reuse, true);
    }
    switch (event.type) {
      case 'CallRequested':
        this.requested(event);
        break;
      case 'CallQueued':
        this.queued(event);
        break;
      case 'CallAdmitted':
        this.admitted(event);
        break;
      case 'CallLeftQueue':
        this.leftQueue(event);
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
      if (!record.live) continue;
      if (query.sinceMs !== undefined && record.requestedMs < query.sinceMs) break;
      if (query.tenantId !== undefined && record.tenantId !== query.tenantId) continue;
      if (query.failed && !endedBadly(record)) continue;
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
      if (!record.live) continue;
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
      if (record.live) {
        if (this.calls.size <= this.bounds.maxCalls && !(record.requestedMs < cutoff)) break;
        this.calls.delete(record.requestId);
        record.live = false;
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

  /**
   * The record of a new call of `requestId`, live and last in `order`, in place of any older call
   * of the same ID: a forgotten one reused (its attempts kept for the next placements), or a new
   * one. Its caller writes every other field.
   */
  private take(requestId: string): Kept {
    const previous = this.calls.get(requestId);
    if (previous !== undefined) previous.live = false;
    const record = this.spare.pop() ?? blankRecord();
    const attempts = record.attempts;
    // pop(), not `length = 0`: that drops the array's store, and the next push allocates one.
    while (attempts.length > 0) {
      const attempt = attempts.pop()!;
      if (this.spareAttempts.length < SPARE_RECORDS) this.spareAttempts.push(attempt);
    }
    record.requestId = requestId;
    record.live = true;
    this.calls.set(requestId, record);
    this.order.push(record);
    return record;
  }

  private requested(event: EventOf<'CallRequested'>, reuseDecided = false): void {
    if (!reuseDecided && this.ownedByAnother(event.requestId, event.tenantId)) {
      this.foreignReuse = event;
      return;
    }
    const record = this.take(event.requestId);
    const demand = event.demand;
    record.tenantId = event.tenantId;
    record.function = event.function;
    record.sessionId = event.sessionId;
    record.retryOf = event.retryOf;
    record.memory = demand.memory;
    record.gpu = demand.gpu === true || (demand.gpuMemory ?? 0) > 0;
    record.state = 'placed';
    record.requestedAt = event.at;
    record.requestedMs = Date.parse(event.at);
    record.requestedSeq = event.seq;
    record.turnWaitMs = event.turnWaitMs;
    record.inputs = event.inputs;
    clearProgress(record);
    record.lastSeq = event.seq;
    this.forgetBefore(record.requestedMs - this.bounds.retentionMs);
  }

  /**
   * Whether the history holds a live call of `requestId` of a tenant other than `tenantId`: a new
   * call of that ID is another tenant's reuse of it, which never changes the owner's record.
   */
  private ownedByAnother(requestId: string, tenantId: string | null): boolean {
    const record = this.calls.get(requestId);
    return record !== undefined && record.live && record.tenantId !== tenantId;
  }

  /** A session call refused "session is busy": it never reached placement, so it starts here. */
  private turnRefused(event: EventOf<'SessionTurnRefused'>): void {
    // Another tenant's ID: refused before placement, it is that tenant's caller's to see, not a
    // record in place of the owner's.
    if (this.ownedByAnother(event.requestId, event.tenantId)) return;
    const at = Date.parse(event.at);
    const record = this.take(event.requestId);
    record.tenantId = event.tenantId;
    record.function = null;
    record.sessionId = event.sessionId;
    record.retryOf = null;
    record.memory = null;
    record.gpu = false;
    record.state = 'rejected';
    record.requestedAt = new Date(at - event.waitedMs).toISOString();
    record.requestedMs = at - event.waitedMs;
    record.requestedSeq = event.seq;
    record.turnWaitMs = event.waitedMs;
    record.inputs = null;
    clearProgress(record);
    record.finishedAt = event.at;
    record.durationMs = event.waitedMs;
    record.code = 'RESOURCE_EXHAUSTED';
    record.message = `session is busy: session ${event.sessionId} still had a call running (and ${event.ahead} waiting ahead) after ${event.waitedMs} ms`;
    record.lastSeq = event.seq;
    this.forgetBefore(at - this.bounds.retentionMs);
  }

  /** The call did not fit now: it waits in the admission queue (after its `CallRequested`). */
  private queued(event: EventOf<'CallQueued'>): void {
    const record = this.calls.get(event.requestId);
    if (!record || record.finishedAt !== null) return;
    record.state = 'queued';
    record.queuedAt = event.at;
    record.queuedWhy =
      event.why.length > MAX_WHY_LENGTH ? `${event.why.slice(0, MAX_WHY_LENGTH - 1)}…` : event.why;
    record.lastSeq = event.seq;
  }

  /** The queue let it go: its placement (or refusal) follows in the same append. */
  private admitted(event: EventOf<'CallAdmitted'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    record.admittedAt = event.at;
    record.queueWaitMs = waitedSince(record.queuedAt, event.at);
    record.lastSeq = event.seq;
  }

  /** It left the queue unplaced: its deadline passed, its client went, it timed out, a restart. */
  private leftQueue(event: EventOf<'CallLeftQueue'>): void {
    const record = this.calls.get(event.requestId);
    if (!record || record.finishedAt !== null) return;
    const waited = waitedSince(record.queuedAt, event.at);
    record.state = 'rejected';
    record.queueWaitMs = waited;
    record.code = event.code;
    record.message = leftQueueMessage(event, waited ?? 0);
    end(record, event.at, event.seq);
  }

  private placed(event: EventOf<'CallPlaced'>): void {
    const record = this.calls.get(event.requestId);
    if (!record) return;
    const attempt = this.spareAttempts.pop() ?? blankAttempt();
    attempt.workerId = event.workerId;
    attempt.containerId = event.containerId;
    attempt.checkpointId = event.checkpointId;
    attempt.version = event.version;
    attempt.routingRevision = event.routingRevision;
    attempt.coldLoad = event.coldLoad === true;
    attempt.placedAt = event.at;
    attempt.placedSeq = event.seq;
    attempt.dialError = null;
    attempt.dialFailedAt = null;
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
    end(record, event.at, event.seq);
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
    const raised = event.ok ? (event.raised ?? null) : null;
    record.state = raised !== null ? 'raised' : event.ok ? 'succeeded' : 'failed';
    record.code = event.ok ? 'OK' : (event.code ?? 'UNKNOWN');
    record.message = raised !== null ? raisedLine(raised) : event.message;
    record.raised = raised;
    // Only a batch's; never more than it carried (its worker's word, bounded by the request's).
    const { inputs } = record;
    const inputsRaised = event.ok && inputs !== null ? (event.inputsRaised ?? null) : null;
    record.inputsRaised = inputsRaised === null ? null : Math.min(inputsRaised, inputs as number);
    end(record, event.at, event.seq);
  }

  private expired(event: EventOf<'ReservationExpired'>): void {
    const record = this.calls.get(event.requestId);
    if (!record || record.finishedAt !== null) return;
    record.state = 'expired';
    record.message =
      'the router released the call: its reservation was stale or in flight at a restart';
    end(record, event.at, event.seq);
  }
}

/**
 * What the history says of a call that left the queue after `waitedMs`: a timeout's words as its
 * client heard them (they tell the wait), a restart's with the wait, the others with why too.
 */
function leftQueueMessage(event: EventOf<'CallLeftQueue'>, waitedMs: number): string {
  const after = `left the queue after ${roughDuration(waitedMs)}`;
  switch (event.reason) {
    case 'timeout':
      return event.message;
    case 'restart':
      return `${after}: ${event.message}`;
    case 'deadline':
      return `${after} (its client's deadline passed): ${event.message}`;
    case 'cancelled':
      return `${after} (its client cancelled it): ${event.message}`;
  }
}

/** Milliseconds from `since` to `at` (never negative); null without `since`. */
function waitedSince(since: string | null, at: string): number | null {
  return since === null ? null : Math.max(0, Date.parse(at) - Date.parse(since));
}

/** What `failed` lists: a call that ended badly, or a batch some of whose inputs raised. */
function endedBadly(record: CallRecord): boolean {
  return FAILED_STATES.has(record.state) || (record.inputsRaised ?? 0) > 0;
}

/** Whether `event` is placement's refusal of `request`, a reuse of another tenant's ID. */
function isRefusedReuse(request: EventOf<'CallRequested'>, event: ClusterEvent): boolean {
  return (
    event.type === 'CallRejected' &&
    event.requestId === request.requestId &&
    event.cause === request.cause &&
    event.code === 'ALREADY_EXISTS'
  );
}
