/**
 * The replay engine: folds a log event by event and, at every event that opens a decision the log
 * holds the whole input of, makes that decision again through the core's table (`decide`, with the
 * replayer's own caches): at every `CallRequested` the call's (`call`: placement), at every
 * `CallDialFailed` (the router could not open a placed call's stream) the failed dial's
 * (`dialFailure`: the probe failure it counts as, and the call placed again or refused). The
 * events the router appended in the same decision are the recorded outcome: they are compared
 * with the computed decision and folded. Events say which decision they belong to: every event of one append records
 * its cause, so the outcome is the events that follow the request with the same cause
 * (`call:REQUEST`, `dial:REQUEST`). A log written before events recorded their cause (`cause` null)
 * is grouped by order, as the decisions emit them: after a failed dial its probe failure (and an
 * eviction with its expiries), then as placement emits them: an optional `SessionUnpinned`, then
 * `CallPlaced` or `CallRejected`, then for a reused session container `SessionPinned` (every reuse
 * re-pinned then: rules 11, which skip a pin that changes nothing, came after causes). A call with no recorded
 * outcome gets the computed decision folded as if it had been appended, so a hand-written log of
 * registrations and requests is a whole simulation.
 *
 * Pure: no I/O, no clock. Feed it events with `push`, call `end` after the last one.
 */
import type { ClusterEvent, EventOf, NewEvent } from '../../src/events/types.js';
import {
  applyInPlace,
  clusterProjection,
  initialState,
  type ClusterState,
} from '../../src/projections/index.js';
import { decide, type DecisionOf } from '../../src/core/decisions.js';
import {
  callOfRequested,
  PlacementCaches,
  PLACEMENT_RULES_VERSION,
  recordedRulesVersion,
  type CallToPlace,
  type PlaceOptions,
  type PlacementDecision,
} from '../../src/core/placement/index.js';
import type { Config } from '../../src/shared/config.js';
import { callOf as callOfQueued } from '../../src/core/admission/index.js';
import type { CallResult } from './call-result.js';
import { decisionFields, eventsDifference } from './compare.js';
import { SeamMap } from './seam-map.js';
import {
  belongsTo,
  reopen,
  settleCheck,
  type CallPlacement,
  type DecisionResult,
  type OpenCheck,
  type ReopenContext,
} from './append-check.js';

/** How to replay. */
export interface ReplayOptions {
  /**
   * Which rules decide: `recorded` (default), each part of the log by the rules version its
   * `RouterStarted` recorded (the released versions' steps are kept in the core); `current`,
   * today's rules throughout ("what would today's rules do").
   */
  readonly rules?: 'recorded' | 'current';
  /** Config values that override the config in force at every decision (`--set`). */
  readonly overrides?: Partial<Config>;
  /** Called for every call once its recorded outcome (if any) is known. */
  readonly onCall?: (result: CallResult) => void;
  /**
   * Called for every other decision of the core the log holds the input of (a reaper pass, a
   * probe's outcome, a worker's report, a call's end, a session's end, a pin change, what workers
   * are told to keep), made again and compared (append-check.ts). Without it they are only folded.
   */
  readonly onDecision?: (result: DecisionResult) => void;
  /**
   * Called at every `CallRequested` with the state it is decided against (before its outcome is
   * folded) and the config in force; for `explain`. The state must not be kept.
   */
  readonly onDecide?: (
    call: CallToPlace,
    state: ClusterState,
    config: Config,
    event: EventOf<'CallRequested'>,
    caches: PlacementCaches,
  ) => void;
  /**
   * Called at every `CallDialFailed` of a call the replayer knows, with the state the call is
   * placed again against (before the failed dial is folded), and the options it is placed again
   * with (null: refused without a placement); for `explain`. The state must not be kept.
   */
  readonly onRedecide?: (
    call: CallToPlace,
    state: ClusterState,
    event: EventOf<'CallDialFailed'>,
    placedWith: PlaceOptions | null,
  ) => void;
  /**
   * This replay starts at a snapshot inside a log whose part before it another replay folds (a
   * range of a parallel `replay verify`): its own maps record what it reads of the calls it never
   * saw, so the seam between the two can be checked (`seam`).
   */
  readonly startsInside?: boolean;
}

/** What a replay of part of a log read and ended with, to join it to the replays beside it. */
export interface Seam {
  readonly calls: SeamMap<CallToPlace>;
  readonly placements: SeamMap<CallPlacement>;
  /** The rules version the log recorded last (null: none seen yet). */
  readonly recordedVersion: number | null;
}

interface PendingCall {
  /** The event that opened the decision: the request, the failed dial, or the admission. */
  readonly event: EventOf<'CallRequested'> | EventOf<'CallDialFailed'> | EventOf<'CallAdmitted'>;
  /** The rules' version in force in the log at the call. */
  readonly rulesVersion: number;
  readonly call: CallToPlace;
  readonly decision: PlacementDecision;
  /** The decision's events after the opening one, as computed now. */
  readonly computed: readonly NewEvent[];
  readonly recorded: ClusterEvent[];
}

/** A decision made again: the event that opened it, its call, and what it decides now. */
interface Redecided {
  readonly opening: PendingCall['event'];
  readonly call: CallToPlace;
  readonly made: {
    readonly events: DecisionOf<'call'>['events'];
    readonly placement: PlacementDecision;
  };
}

/** The demand of a call the replayer never saw requested. */
const NO_DEMAND: CallToPlace['demand'] = {
  memory: null,
  gpuMemory: null,
  gpu: null,
  disableOptimizedExecution: null,
  checkpointId: null,
  imports: null,
  packages: null,
  pinned: null,
};

/** What a replay reports when the log admitted a call where admission now admits none. */
const ADMITS_NONE: PlacementDecision = {
  outcome: 'rejected',
  events: [],
  code: 'FAILED_PRECONDITION',
  message: 'admission admits no queued call here now',
  version: null,
  routingRevision: null,
  retryAfterMs: null,
};

const OUTCOMES: ReadonlySet<string> = new Set(['CallPlaced', 'CallRejected']);

/** Folds a log and re-decides its calls. */
export class Replayer {
  private working: ClusterState = initialState();
  private pending: PendingCall | undefined;
  /** Placement's caches for the working state, which is folded with them as its change sink. */
  private readonly caches = new PlacementCaches();
  /** Calls requested and not yet ended, for deciding a failed dial of one again. */
  private readonly calls: SeamMap<CallToPlace>;
  /** Where each call not yet finished was last placed, for deciding its first answer again. */
  private readonly placements: SeamMap<CallPlacement>;
  private readonly context: ReopenContext = {
    placementOf: (requestId) => this.placements.get(requestId),
  };

  constructor(private readonly options: ReplayOptions = {}) {
    this.calls = new SeamMap(options.startsInside === true);
    this.placements = new SeamMap(options.startsInside === true);
  }

  /** Its own maps and the rules version it knows, for joining it to the replays beside it. */
  get seam(): Seam {
    return {
      calls: this.calls,
      placements: this.placements,
      recordedVersion: this.recordedVersion,
    };
  }

  /** The state after every event pushed so far (and the computed outcomes folded). */
  get state(): ClusterState {
    return this.working;
  }

  /** The rules version the log recorded last (1 before any, or for a log that recorded none). */
  get logRulesVersion(): number {
    return recordedRulesVersion(this.recordedVersion);
  }

  /**
   * The config placement uses at the next decision: the config in force plus the overrides, made
   * again only when the fold replaced the config in force (a start, a snapshot), not per call.
   */
  get config(): Config {
    if (this.configInForce === undefined || this.configFrom !== this.working.config) {
      this.configFrom = this.working.config;
      this.configInForce = { ...this.working.config, ...this.options.overrides };
    }
    return this.configInForce;
  }

  /** The config in force the last `config` was made from (the fold replaces it, never changes it). */
  private configFrom: Config | undefined;
  private configInForce: Config | undefined;

  /** The rules version the log recorded last (before any `--rules current`). */
  private recordedVersion: number | null = null;

  /** Failed dials of calls never seen requested: folded, not decided again. */
  private dialsNotDecided = 0;

  /**
   * Failed dials of calls requested before the first event pushed (a log that starts at a
   * snapshot: an archive file, a window): folded, not decided again, as no event pushed holds
   * the call's demand.
   */
  get undecidedDials(): number {
    return this.dialsNotDecided;
  }
  /** A decision other than a call's being compared with what the log recorded for it. */
  private check: OpenCheck | undefined;

  /** Processes the next event of the log. */
  push(recordedEvent: ClusterEvent): void {
    let event = recordedEvent;
    if (event.type === 'RouterStarted') {
      this.recordedVersion = event.rulesVersion;
      if (this.options.rules === 'current') {
        event = { ...event, rulesVersion: PLACEMENT_RULES_VERSION };
      }
    } else if (event.type === 'Snapshot' && this.options.rules === 'current') {
      event = this.snapshotUnderCurrentRules(event);
    }
    if (this.openDecisionTakes(event, true)) return;
    // The router decided against its state at the seq before, which the snapshots it appended
    // advance too: a reader that passed one over (the fold has its state) advances it here. A
    // snapshot after a gap is folded with the gap in sight (its reservations replace what was seen).
    if (event.type !== 'Snapshot' && this.working.lastSeq < event.seq - 1) {
      this.working = clusterProjection.advance(this.working, event.seq - 1);
    }
    const redecided = this.redecide(event);
    if (redecided === undefined && this.options.onDecision) {
      this.check = reopen(this.working, event, this.context);
      if (this.check) {
        this.takeIntoCheck(this.check, event);
        return;
      }
    }
    this.apply(event);
    if (redecided === undefined) return;
    const { opening, call, made } = redecided;
    // A call admitted from the queue is known from its queue entry (demand included) when its
    // request came before the event this replay started at (a snapshot keeps the queue).
    if (
      opening.type === 'CallRequested' ||
      (opening.type === 'CallAdmitted' &&
        call.demand !== NO_DEMAND &&
        !this.calls.has(call.requestId))
    ) {
      this.calls.set(call.requestId, call);
    }
    this.pending = {
      event: opening,
      call,
      decision: made.placement,
      // The opening event is the recorded one: the outcome is what the decision appends after it.
      computed: made.events.slice(1),
      recorded: [],
      rulesVersion: recordedRulesVersion(this.recordedVersion),
    };
  }

  /**
   * A `Snapshot` as `--rules current` folds it: the rules version its state records (the one its
   * log's last `RouterStarted` recorded) replaced by today's, as that `RouterStarted` would have
   * been, so a replay that starts at a snapshot (an archive file, a window) decides by today's
   * rules from its first call; the version recorded stays the log's for the reports.
   */
  private snapshotUnderCurrentRules(event: EventOf<'Snapshot'>): EventOf<'Snapshot'> {
    const recorded = event.state.rulesVersion;
    if (typeof recorded !== 'number') return event;
    this.recordedVersion ??= recorded;
    return { ...event, state: { ...event.state, rulesVersion: PLACEMENT_RULES_VERSION } };
  }

  /**
   * The decision `event` opens, made again against the state before it through the core's table,
   * when the log holds its whole input: a call's (`CallRequested`), a failed dial of a call the
   * replayer knows (`CallDialFailed`). Undefined for any other event: it is only folded.
   */
  private redecide(event: ClusterEvent): Redecided | undefined {
    switch (event.type) {
      case 'CallRequested': {
        const call = callOfRequested(event);
        const config = this.config;
        this.options.onDecide?.(call, this.working, config, event, this.caches);
        const made = decide('call', this.working, { call, config, caches: this.caches });
        return { opening: event, call, made };
      }
      case 'CallAdmitted': {
        // Admission: the next queued call in fair order, decided against the state before.
        const queued = this.working.queue.get(event.requestId);
        const made = decide('admit', this.working, { config: this.config, caches: this.caches });
        const call: CallToPlace = queued
          ? callOfQueued(this.working, queued)
          : (this.calls.get(event.requestId) ?? {
              requestId: event.requestId,
              sessionId: null,
              demand: NO_DEMAND,
            });
        const placement = made.placement ?? ADMITS_NONE;
        return { opening: event, call, made: { events: made.events, placement } };
      }
      case 'CallDialFailed': {
        const call = this.calls.get(event.requestId);
        if (call === undefined) {
          this.dialsNotDecided += 1;
          return undefined;
        }
        const made = decide('dialFailure', this.working, {
          call,
          workerId: event.workerId,
          error: event.error,
          config: this.config,
          caches: this.caches,
        });
        this.options.onRedecide?.(call, this.working, event, made.placedWith);
        return { opening: event, call, made };
      }
      default:
        return undefined;
    }
  }

  /**
   * Settles the decision still open unless `event`, the next event of the log, belongs to it, as
   * pushing `event` would, without folding `event`; whether nothing stays open. A replay that stops
   * at a seam (a range of a parallel verify) then holds the state of the log up to the seam.
   */
  settleBefore(event: ClusterEvent): boolean {
    return !this.openDecisionTakes(event, false);
  }

  /**
   * Whether `event` belongs to the decision still open (taken into it when `take`); when it does
   * not, that decision is settled.
   */
  private openDecisionTakes(event: ClusterEvent, take: boolean): boolean {
    if (this.pending) {
      if (this.belongsToPending(this.pending, event)) {
        if (take) this.pending.recorded.push(event);
        return true;
      }
      this.settle(this.pending);
    }
    if (this.check) {
      if (belongsTo(this.check, event)) {
        if (take) this.takeIntoCheck(this.check, event);
        return true;
      }
      this.settleCheck();
    }
    return false;
  }

  /** Settles the last call; call once after the last event. */
  end(): void {
    if (this.pending) this.settle(this.pending);
    if (this.check) this.settleCheck(true);
  }

  /**
   * A recorded event of the open check: folded at once, or, for a deferred check (decided once
   * its append is all in, against the state before it), held back until the check settles.
   */
  private takeIntoCheck(check: OpenCheck, event: ClusterEvent): void {
    check.recorded.push(event);
    if (check.deferred) return;
    this.apply(event);
    if (check.recorded.length >= Math.max(1, check.computed.length)) this.settleCheck();
  }

  private settleCheck(logEnded = false): void {
    const check = this.check;
    this.check = undefined;
    if (!check) return;
    this.options.onDecision?.(settleCheck(check, this.working, logEnded));
    if (check.deferred) for (const event of check.recorded) this.apply(event);
  }

  private apply(event: ClusterEvent): void {
    const folded = this.working.lastSeq;
    this.working = applyInPlace(this.working, event, this.caches);
    switch (event.type) {
      case 'CallPlaced':
        this.placements.set(event.requestId, {
          workerId: event.workerId,
          containerId: event.containerId,
          sessionId: event.sessionId ?? this.calls.get(event.requestId)?.sessionId ?? null,
        });
        break;
      case 'RouterStarted':
        // A new router: no call of the one before is answered through it.
        this.placements.clear();
        break;
      case 'Snapshot':
        // A fold that starts at a snapshot (a window, a part of an archive) has seen no
        // `RouterStarted`: the rules version the log was recorded under is the one the
        // snapshot's state records (a divergence there is by the log's own rules, not v1's).
        this.recordedVersion ??= this.working.rulesVersion;
        // The calls placed before it and not yet answered are its reservations, placed where
        // they say. After a gap (a damaged file passed over) what this replay saw before it may
        // be stale (a call placed again in the gap): the snapshot's reservations replace it.
        if (event.seq !== folded + 1) this.placements.drop();
        for (const reservation of this.working.reservations.values()) {
          if (this.placements.holds(reservation.requestId)) continue;
          this.placements.seed(reservation.requestId, {
            workerId: reservation.workerId,
            containerId: reservation.containerId,
            sessionId: reservation.sessionId,
          });
        }
        break;
      case 'CallFinished':
      case 'CallRejected':
        this.placements.delete(event.requestId);
        this.calls.delete(event.requestId);
        break;
      case 'ReservationExpired':
      case 'CallLeftQueue':
        this.calls.delete(event.requestId);
        break;
      default:
        break;
    }
  }

  /** Whether `event` is part of the decision that recorded the pending call's outcome. */
  private belongsToPending(pending: PendingCall, event: ClusterEvent): boolean {
    // Each failed dial opens a decision of its own, even right after one with the same cause.
    if (
      event.type === 'CallDialFailed' ||
      event.type === 'CallRequested' ||
      event.type === 'CallAdmitted'
    ) {
      return false;
    }
    const cause = pending.event.cause;
    if (cause !== null) return event.cause === cause && event.type !== 'Snapshot';
    return event.cause === null && belongsByOrder(pending, event);
  }

  private settle(pending: PendingCall): void {
    this.pending = undefined;
    const { event, computed, recorded } = pending;
    for (const recordedEvent of recorded) this.apply(recordedEvent);
    const hasOutcome =
      event.cause !== null ? recorded.length > 0 : recorded.some((e) => OUTCOMES.has(e.type));
    let divergence: string | null = null;
    if (hasOutcome) {
      divergence = eventsDifference(recorded, computed);
    } else {
      for (const computedEvent of computed) this.apply(stampLike(computedEvent, event));
    }
    if (!this.options.onCall) return;
    this.options.onCall(new SettledCall(pending, hasOutcome, divergence));
  }
}

/**
 * A settled call as a `CallResult`: the recorded events' fields are made when a listener reads
 * them, not for every call; a class, so no function is made per call.
 */
class SettledCall implements CallResult {
  readonly seq: number;
  readonly at: string;
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly tenantId: string | null;
  readonly decision: PlacementDecision;
  readonly queued: string | null;
  readonly recorded: CallResult['recorded'];
  readonly rulesVersion: number;
  private recordedFields: Record<string, unknown>[] | null | undefined;

  constructor(
    private readonly pending: PendingCall,
    private readonly hasOutcome: boolean,
    readonly divergence: string | null,
  ) {
    const { event, call } = pending;
    this.seq = event.seq;
    this.at = event.at;
    this.requestId = event.requestId;
    this.sessionId = call.sessionId;
    this.tenantId = call.tenantId ?? null;
    this.decision = pending.decision;
    this.queued = queuedWhy(pending.computed);
    this.recorded = !hasOutcome ? 'none' : divergence === null ? 'match' : 'diverged';
    this.rulesVersion = pending.rulesVersion;
  }

  get recordedEvents(): Record<string, unknown>[] | null {
    this.recordedFields ??= this.hasOutcome ? this.pending.recorded.map(decisionFields) : null;
    return this.recordedFields;
  }
}

/** Why a decision's call waits in the admission queue (its `CallQueued`), or null. */
function queuedWhy(events: readonly NewEvent[]): string | null {
  for (const event of events) if (event.type === 'CallQueued') return event.why;
  return null;
}

/**
 * In a log whose events record no cause: whether `event` is the next event the pending decision
 * emits (after a failed dial its probe failure, an eviction and its expiries; then an optional
 * `SessionUnpinned`, the outcome, then a reuse's `SessionPinned`).
 */
function belongsByOrder(pending: PendingCall, event: ClusterEvent): boolean {
  const { call, recorded } = pending;
  const outcome = recorded.find((e) => OUTCOMES.has(e.type));
  const dial = pending.event.type === 'CallDialFailed' ? pending.event : undefined;
  // Events before the placement part: a failed dial's consequences.
  const beforePlacement = recorded.every(
    (e) =>
      e.type === 'WorkerProbeFailed' || e.type === 'WorkerEvicted' || e.type === 'SessionExpired',
  );
  switch (event.type) {
    case 'WorkerProbeFailed':
      return dial !== undefined && recorded.length === 0 && event.workerId === dial.workerId;
    case 'WorkerEvicted':
      return (
        dial !== undefined &&
        recorded.length === 1 &&
        recorded[0]?.type === 'WorkerProbeFailed' &&
        event.workerId === dial.workerId
      );
    case 'SessionExpired':
      return (
        dial !== undefined &&
        outcome === undefined &&
        recorded.some((e) => e.type === 'WorkerEvicted') &&
        beforePlacement
      );
    case 'SessionUnpinned':
      return beforePlacement && outcome === undefined && event.sessionId === call.sessionId;
    case 'CallPlaced':
    case 'CallRejected':
      return outcome === undefined && event.requestId === call.requestId;
    case 'SessionPinned':
      return (
        outcome?.type === 'CallPlaced' &&
        recorded.at(-1) === outcome &&
        outcome.containerId !== null &&
        // A log in the documented vocabulary names no request on SessionPinned.
        (event.requestId === call.requestId ||
          (event.requestId === null && event.sessionId === call.sessionId)) &&
        event.containerId === outcome.containerId
      );
    default:
      return false;
  }
}

/** A computed event stamped with the seq, time and cause of the event that opened its decision. */
function stampLike(event: NewEvent, request: PendingCall['event']): ClusterEvent {
  return { seq: request.seq, at: request.at, cause: request.cause, ...event };
}
