/**
 * Every decision of the core made again, beside placement's (replayer.ts): at the first event of
 * each append whose cause names a decision the log holds the input of, the decision is made
 * again through the core's table (`decide`) against the state before it, and its events are
 * compared with the ones the log recorded under that cause. The input is read from the recorded
 * opening event (a report's fields, a probe's error, a call's end code, the time of a reaper pass
 * or of a routing pass), so what is checked is everything the core derives from it: evictions and
 * their expiries, releases, forgotten containers, consequences of a report, of an end, of a
 * session end, and which workers are told what to keep.
 *
 * Three decisions record their input spread over their events, so they are made once the whole
 * append is in (`Deferred`), against the state before its first event: a router's start (the
 * `RouterStarted` it wrote is its input: config, version, rules; a `CatalogueLoaded` after it names
 * the catalogue it was given; the recovery's releases are what is decided), a residency report
 * (the versions it changed are in its `ResidencyChanged` events, its budget in `ResidencyBudget`
 * or, when that is absent, unchanged), and a call's first answer (`CallBound` names the container
 * the worker answered from; whether the session is pinned to it, and to which worker, is
 * decided from the call's placement). docs/replay.md says what none of them can check.
 *
 * Pure: no I/O, no clock.
 */
import type { ClusterEvent, NewEvent } from '../../src/events/types.js';
import { CONSEQUENCES_LOGGED } from '../../src/events/upcast.js';
import type { ClusterState } from '../../src/projections/cluster-state.js';
import { decide } from '../../src/core/decisions.js';
import { PlacementCaches, type PlacedDecision } from '../../src/core/placement/index.js';
import { decisionFields, eventsDifference } from './compare.js';

/** The version a scenario recorder writes in `RouterStarted` (replay/engine/scenario.ts). */
const SCRIPTED_VERSION = 'fixture';

/** Which decision an append is, by the trigger of the core's table it re-made. */
export type CheckedTrigger =
  | 'start'
  | 'answer'
  | 'reaper'
  | 'probeFailure'
  | 'probeSuccess'
  | 'statusReport'
  | 'utilizationReport'
  | 'containerReport'
  | 'residencyReport'
  | 'end'
  | 'sessionEnd'
  | 'protection'
  | 'turnRefusal'
  | 'stage'
  | 'pinChange'
  | 'quotaChange';

/** One decision made again, and how it compares with the log. */
export interface DecisionResult {
  /** The seq and time of its first recorded event. */
  readonly seq: number;
  readonly at: string;
  readonly trigger: CheckedTrigger;
  /** The cause the log recorded (`report:w1`, `reaper`, ...). */
  readonly cause: string;
  readonly recorded: 'match' | 'diverged';
  readonly recordedEvents: readonly Record<string, unknown>[];
  readonly computedEvents: readonly Record<string, unknown>[];
  readonly divergence: string | null;
}

/**
 * A decision whose input the log records across all the events of its append: it is made once
 * they are all in, against the state before the first (the replayer holds them back from the
 * fold until then).
 */
export interface Deferred {
  /** Whether `event` (of the same cause) continues the append of `recorded`. */
  accepts(recorded: readonly ClusterEvent[], event: ClusterEvent): boolean;
  /** The decision's events, made against `state`, the state before the append's first event. */
  decide(state: ClusterState, recorded: readonly ClusterEvent[]): readonly NewEvent[];
}

/** A decision being compared: what it makes now, what the log recorded so far. */
export interface OpenCheck {
  readonly trigger: CheckedTrigger;
  readonly cause: string;
  readonly seq: number;
  readonly at: string;
  /** The events made now (empty until a deferred check settles). */
  readonly computed: readonly NewEvent[];
  readonly recorded: ClusterEvent[];
  /** Set when the decision is made only once its append is all in. */
  readonly deferred?: Deferred;
  /**
   * Set in a log written before every consequence was an event (schema v1): its fold implied the
   * sessions a cause expired or unpinned, so such events a log leaves out are not a divergence.
   */
  readonly consequencesImplied?: boolean;
}

/** The consequences a v1 fold applied itself (src/events/upcast.ts). */
const V1_IMPLIED: ReadonlySet<string> = new Set(['SessionExpired', 'SessionUnpinned']);

/**
 * `made` without the consequences a v1 log may leave to its fold, unless it records them. A
 * recorded one is matched as the comparison matches events: a field the v1 vocabulary lacks
 * (`SessionExpired.causeSeq`) that the log leaves out is not compared.
 */
function withoutImplied(
  made: readonly NewEvent[],
  recorded: readonly ClusterEvent[],
): readonly NewEvent[] {
  return made.filter(
    (event) =>
      !V1_IMPLIED.has(event.type) ||
      recorded.some((was) => was.type === event.type && eventsDifference([was], [event]) === null),
  );
}

/** Where a call was placed, as the log's last `CallPlaced` of it says: what its answer binds. */
export interface CallPlacement {
  readonly workerId: string;
  /** The session's container it reuses; null for a new container. */
  readonly containerId: string | null;
  readonly sessionId: string | null;
}

/** What the replayer knows beside the state: the placement of each call not yet finished. */
export interface ReopenContext {
  placementOf(requestId: string): CallPlacement | undefined;
}

const NO_CONTEXT: ReopenContext = { placementOf: () => undefined };

/** The event that opens a check, and the state before it (no function is made per event). */
class Opening {
  constructor(
    private readonly state: ClusterState,
    private readonly event: ClusterEvent,
    private readonly cause: string,
  ) {}

  open(trigger: CheckedTrigger, computed: readonly NewEvent[], deferred?: Deferred): OpenCheck {
    return {
      trigger,
      cause: this.cause,
      seq: this.event.seq,
      at: this.event.at,
      computed,
      recorded: [],
      deferred,
      consequencesImplied: this.state.schemaVersion < CONSEQUENCES_LOGGED,
    };
  }
}

/** The events of a quota change again: the change the recorded event describes, whole. */
function quotaChangeEvents(
  state: ClusterState,
  event: ClusterEvent & { type: 'QuotaChanged' | 'QuotaRemoved' },
): readonly NewEvent[] {
  const { tenantId } = event;
  if (event.type === 'QuotaRemoved') {
    return decide('quotaRemove', state, { tenantId, expectRevision: null }).events;
  }
  return decide('quotaSet', state, {
    tenantId,
    weight: event.weight,
    maxSlots: event.maxSlots ?? 'none',
    maxQueued: event.maxQueued,
    expectRevision: null,
  }).events;
}

/** The events of a pin change again: the change the recorded `RoutingRevised` describes. */
function pinChangeEvents(state: ClusterState, event: ClusterEvent & { type: 'RoutingRevised' }) {
  const now = Date.parse(event.at);
  const entry = state.routing.entries.get(event.tenantId);
  const subsets = new PlacementCaches().subsets;
  const expectRevision = null;
  if (event.version === null)
    return decide('remove', state, { tenantId: event.tenantId, expectRevision, now, subsets });
  if (entry !== undefined && entry.version === event.version && event.k !== null) {
    return decide('setK', state, {
      tenantId: event.tenantId,
      k: event.k,
      force: true,
      expectRevision,
      now,
      subsets,
    });
  }
  const staged = state.routing.staged.get(event.tenantId);
  if (staged !== undefined && staged.version === event.version) {
    return decide('flip', state, {
      tenantId: event.tenantId,
      force: true,
      expectRevision,
      now,
      subsets,
    });
  }
  return decide('rollback', state, { tenantId: event.tenantId, expectRevision, now, subsets });
}

/**
 * The decision `event` opens, made again against `state` (the state before it), or undefined
 * when it opens none this check makes again (calls and failed dials are placement's; a start, a
 * bound answer and events without a cause are folded as recorded).
 */
export function reopen(
  state: ClusterState,
  event: ClusterEvent,
  context: ReopenContext = NO_CONTEXT,
): OpenCheck | undefined {
  const cause = event.cause;
  if (cause === null) return undefined;
  const opening = new Opening(state, event, cause);
  const colon = cause.indexOf(':');
  const kind = colon < 0 ? cause : cause.slice(0, colon);
  switch (kind) {
    case 'start':
      // A scripted fixture writes its start by hand (a catalogue again, releases as a reaper's):
      // folded as recorded, like its reaper passes.
      return event.type === 'RouterStarted' && event.version !== SCRIPTED_VERSION
        ? opening.open('start', [], START)
        : undefined;
    case 'answer':
      return event.type === 'CallBound' ? reopenAnswer(state, event, context, opening) : undefined;
    case 'call':
      return event.type === 'SessionTurnRefused'
        ? opening.open(
            'turnRefusal',
            decide('turnRefusal', state, {
              requestId: event.requestId,
              sessionId: event.sessionId,
              tenantId: event.tenantId,
              waitedMs: event.waitedMs,
              ahead: event.ahead,
            }).events,
          )
        : undefined;
    case 'reaper':
      // A scripted fixture (a scenario's RouterStarted says `fixture`) writes its reaper's events
      // by hand, with no pass behind them at their time: they are folded as recorded.
      return state.routerVersion === SCRIPTED_VERSION
        ? undefined
        : opening.open('reaper', decide('reaper', state, { now: Date.parse(event.at) }).events);
    case 'routing':
      return event.type === 'ResidencyProtected'
        ? opening.open(
            'protection',
            decide('protection', state, { now: Date.parse(event.at) }).events,
          )
        : undefined;
    case 'probe':
      if (event.type === 'WorkerProbeFailed') {
        return opening.open(
          'probeFailure',
          decide('probeFailure', state, { workerId: event.workerId, error: event.error }).events,
        );
      }
      if (event.type === 'WorkerProbeSucceeded') {
        return opening.open(
          'probeSuccess',
          decide('probeSuccess', state, { workerId: event.workerId }).events,
        );
      }
      return undefined;
    case 'end':
      return event.type === 'CallFinished'
        ? opening.open(
            'end',
            decide('end', state, {
              requestId: event.requestId,
              code: event.ok ? null : event.code,
              message: event.message,
              raised: event.raised ?? null,
              inputsRaised: event.inputsRaised ?? null,
            }).events,
          )
        : undefined;
    case 'session':
      return event.type === 'SessionEnded'
        ? opening.open(
            'sessionEnd',
            decide('sessionEnd', state, { sessionId: event.sessionId, tenantId: event.tenantId })
              .events,
          )
        : undefined;
    case 'admin':
      if (event.type === 'QuotaChanged' || event.type === 'QuotaRemoved') {
        try {
          return opening.open('quotaChange', quotaChangeEvents(state, event));
        } catch {
          // Refused now (a quota change the core would not make against this state).
          return opening.open('quotaChange', []);
        }
      }
      try {
        return reopenPinChange(state, event, Date.parse(event.at), opening);
      } catch {
        // Refused now (a pin change the core would not make against this state): nothing made.
        return opening.open(event.type === 'PinStaged' ? 'stage' : 'pinChange', []);
      }
    case 'report':
      return reopenReport(state, event, opening);
    default:
      return undefined;
  }
}

function reopenPinChange(
  state: ClusterState,
  event: ClusterEvent,
  now: number,
  opening: Opening,
): OpenCheck | undefined {
  {
    if (event.type === 'PinStaged') {
      return opening.open(
        'stage',
        decide('stage', state, {
          tenantId: event.tenantId,
          version: event.version,
          k: event.k,
          force: true,
          now,
          subsets: new PlacementCaches().subsets,
        }).events,
      );
    }
    return event.type === 'RoutingRevised'
      ? opening.open('pinChange', pinChangeEvents(state, event).events)
      : undefined;
  }
}

/** A router's start: its `RouterStarted` and the catalogue after it are its input. */
const START: Deferred = {
  accepts: (_recorded, event) => event.type !== 'RouterStarted',
  decide(state, recorded) {
    const [started] = recorded;
    if (started?.type !== 'RouterStarted') return [];
    const loaded = recorded.find((event) => event.type === 'CatalogueLoaded');
    const made = decide('start', state, {
      config: state.config,
      version: started.version,
      catalogue:
        loaded?.type === 'CatalogueLoaded'
          ? { catalogue: loaded.catalogue, revision: loaded.revision }
          : undefined,
    }).events;
    // Its first event is the facts of the build that started (config, version, rules and
    // schema versions): the input, taken as recorded.
    const { seq: _seq, at: _at, cause: _cause, ...facts } = started;
    return [facts, ...made.slice(1)];
  },
};

/** A residency report: its budget (when it changed), then each version whose state changed. */
function residencyDeferred(workerId: string): Deferred {
  return {
    accepts: (recorded, event) =>
      event.type === 'ResidencyChanged' &&
      event.workerId === workerId &&
      // A version named twice is the next report's (one report names a version once).
      !recorded.some(
        (seen) => seen.type === 'ResidencyChanged' && seen.checkpointId === event.checkpointId,
      ),
    decide(state, recorded) {
      const budget = recorded.find((event) => event.type === 'ResidencyBudget');
      const residentMemory =
        budget?.type === 'ResidencyBudget'
          ? budget.residentMemory
          : (state.routing.workers.get(workerId)?.residentMemory ?? null);
      const versions = recorded.flatMap((event) =>
        event.type === 'ResidencyChanged'
          ? [{ checkpointId: event.checkpointId, state: event.state, error: event.error }]
          : [],
      );
      return decide('residencyReport', state, { workerId, residentMemory, versions }).events;
    },
  };
}

/** A call's first answer, bound to the container its `CallBound` names. */
function reopenAnswer(
  state: ClusterState,
  event: ClusterEvent & { type: 'CallBound' },
  context: ReopenContext,
  opening: Opening,
): OpenCheck | undefined {
  const placement = context.placementOf(event.requestId);
  // A log that begins after the call was placed: its placement is not in it.
  if (placement === undefined) return undefined;
  const { requestId } = event;
  const reservation = state.reservations.get(requestId);
  const sessionId = placement.sessionId ?? reservation?.sessionId ?? null;
  const placed: PlacedDecision = {
    outcome: 'placed',
    events: [],
    workerId: placement.workerId,
    containerId: placement.containerId,
    checkpointId: event.checkpointId,
    packages: [],
    skippedPackages: [],
    memory: 0,
    version: null,
    routingRevision: null,
    coldLoad: false,
  };
  return opening.open(
    'answer',
    decide('answer', state, {
      requestId,
      sessionId,
      placed,
      ids: {
        requestId,
        sessionId: sessionId ?? '',
        workerId: placement.workerId,
        containerId: event.containerId,
        checkpointId: event.checkpointId ?? '',
        version: '',
        routingRevision: 0,
      },
    }).events,
  );
}

function reopenReport(
  state: ClusterState,
  event: ClusterEvent,
  opening: Opening,
): OpenCheck | undefined {
  switch (event.type) {
    case 'ResidencyBudget':
    case 'ResidencyChanged':
      return opening.open('residencyReport', [], residencyDeferred(event.workerId));
    case 'WorkerRegistered':
    case 'WorkerLeaving':
    case 'WorkerEvicted': {
      if (event.type === 'WorkerEvicted' && event.reason !== 'restarted') return undefined;
      const known = state.workers.get(event.workerId);
      const report =
        event.type === 'WorkerRegistered'
          ? { ...event, status: event.status }
          : {
              workerId: event.workerId,
              status: 'removed' as const,
              address: known?.address ?? null,
              error: null,
              flavor: known?.flavor ?? ('cpu' as const),
              memoryTotal: known?.memoryTotal ?? null,
              maxContainers: known?.maxContainers ?? null,
              gpuMemoryTotal: known?.gpuMemoryTotal ?? null,
              instanceId: known?.instanceId ?? null,
              containers: null,
              reportSeq: null,
            };
      // A registration that displaced a live instance of the same worker ID logs its eviction
      // first (`restarted`): its holder did not answer. That decision is checked from its
      // registration, which the eviction's group holds.
      if (event.type === 'WorkerEvicted') return undefined;
      return opening.open(
        'statusReport',
        decide('statusReport', state, { report, holderAnswers: false }).events,
      );
    }
    case 'WorkerUtilization':
      return opening.open(
        'utilizationReport',
        decide('utilizationReport', state, {
          workerId: event.workerId,
          memoryUsed: event.memoryUsed,
          containerCount: event.containerCount,
          cpuUsed: event.cpuUsed,
          cpuTotal: event.cpuTotal,
          gpuMemoryUsed: event.gpuMemoryUsed,
          instanceId: state.workers.get(event.workerId)?.instanceId ?? null,
          containers: event.containers,
          reportSeq: event.reportSeq,
          standbys: event.standbys ?? null,
        }).events,
      );
    case 'ContainerStateChanged':
      return opening.open(
        'containerReport',
        decide('containerReport', state, {
          workerId: event.workerId,
          containerId: event.containerId,
          state: event.state,
          checkpointId: event.checkpointId,
          instanceId: state.workers.get(event.workerId)?.instanceId ?? null,
          reportSeq: event.reportSeq,
        }).events,
      );
    default:
      return undefined;
  }
}

/** Whether `event` is recorded as part of `check` (same cause, and room for it). */
export function belongsTo(check: OpenCheck, event: ClusterEvent): boolean {
  if (event.cause !== check.cause || event.type === 'Snapshot') return false;
  if (check.deferred) return check.deferred.accepts(check.recorded, event);
  return check.recorded.length < Math.max(1, check.computed.length);
}

/**
 * The result of a check whose recorded events are all in; a deferred one is decided now, against
 * `state` (the state before its first event). `logEnded`: the log ended with this check's append.
 */
export function settleCheck(
  check: OpenCheck,
  state?: ClusterState,
  logEnded = false,
): DecisionResult {
  const decided =
    check.deferred && state ? check.deferred.decide(state, check.recorded) : check.computed;
  const made = check.consequencesImplied ? withoutImplied(decided, check.recorded) : decided;
  // A log that ends inside an append (an exported range cut there) holds its first events only:
  // they are compared with as many of the decision's.
  const computed = logEnded ? made.slice(0, Math.max(1, check.recorded.length)) : made;
  return new SettledCheck(check, computed, eventsDifference(check.recorded, computed));
}

/**
 * A settled check as a `DecisionResult`: the events' fields are made when a listener reads them (a
 * divergence's report), not for every decision; a class, so no function is made per decision.
 */
class SettledCheck implements DecisionResult {
  readonly seq: number;
  readonly at: string;
  readonly trigger: CheckedTrigger;
  readonly cause: string;
  readonly recorded: 'match' | 'diverged';
  private recordedFields: readonly Record<string, unknown>[] | undefined;
  private computedFields: readonly Record<string, unknown>[] | undefined;

  constructor(
    private readonly check: OpenCheck,
    private readonly computed: readonly NewEvent[],
    readonly divergence: string | null,
  ) {
    this.seq = check.seq;
    this.at = check.at;
    this.trigger = check.trigger;
    this.cause = check.cause;
    this.recorded = divergence === null ? 'match' : 'diverged';
  }

  get recordedEvents(): readonly Record<string, unknown>[] {
    this.recordedFields ??= this.check.recorded.map(decisionFields);
    return this.recordedFields;
  }

  get computedEvents(): readonly Record<string, unknown>[] {
    this.computedFields ??= this.computed.map(decisionFields);
    return this.computedFields;
  }
}
