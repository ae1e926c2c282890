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
 * Pure: no I/O, no clock.
 */
import type { ClusterEvent, NewEvent } from '../../src/events/types.js';
import type { ClusterState } from '../../src/projections/cluster-state.js';
import { decide } from '../../src/core/decisions.js';
import { PlacementCaches } from '../../src/core/placement/index.js';
import { decisionFields, firstDifference } from './compare.js';

/** The version a scenario recorder writes in `RouterStarted` (replay/engine/scenario.ts). */
const SCRIPTED_VERSION = 'fixture';

/** Which decision an append is, by the trigger of the core's table it re-made. */
export type CheckedTrigger =
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
  | 'pinChange';

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

/** A decision being compared: what it makes now, what the log recorded so far. */
export interface OpenCheck {
  readonly trigger: CheckedTrigger;
  readonly cause: string;
  readonly seq: number;
  readonly at: string;
  readonly computed: readonly NewEvent[];
  readonly recorded: ClusterEvent[];
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
export function reopen(state: ClusterState, event: ClusterEvent): OpenCheck | undefined {
  const cause = event.cause;
  if (cause === null) return undefined;
  const opened = (trigger: CheckedTrigger, computed: readonly NewEvent[]): OpenCheck => ({
    trigger,
    cause,
    seq: event.seq,
    at: event.at,
    computed,
    recorded: [],
  });
  const now = Date.parse(event.at);
  const kind = cause.split(':', 1)[0];
  switch (kind) {
    case 'call':
      return event.type === 'SessionTurnRefused'
        ? opened(
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
        : opened('reaper', decide('reaper', state, { now }).events);
    case 'routing':
      return event.type === 'ResidencyProtected'
        ? opened('protection', decide('protection', state, { now }).events)
        : undefined;
    case 'probe':
      if (event.type === 'WorkerProbeFailed') {
        return opened(
          'probeFailure',
          decide('probeFailure', state, { workerId: event.workerId, error: event.error }).events,
        );
      }
      if (event.type === 'WorkerProbeSucceeded') {
        return opened(
          'probeSuccess',
          decide('probeSuccess', state, { workerId: event.workerId }).events,
        );
      }
      return undefined;
    case 'end':
      return event.type === 'CallFinished'
        ? opened(
            'end',
            decide('end', state, {
              requestId: event.requestId,
              code: event.ok ? null : event.code,
              message: event.message,
            }).events,
          )
        : undefined;
    case 'session':
      return event.type === 'SessionEnded'
        ? opened(
            'sessionEnd',
            decide('sessionEnd', state, { sessionId: event.sessionId, tenantId: event.tenantId })
              .events,
          )
        : undefined;
    case 'admin':
      try {
        return reopenPinChange(state, event, now, opened);
      } catch {
        // Refused now (a pin change the core would not make against this state): nothing made.
        return opened(event.type === 'PinStaged' ? 'stage' : 'pinChange', []);
      }
    case 'report':
      return reopenReport(state, event, opened);
    default:
      return undefined;
  }
}

function reopenPinChange(
  state: ClusterState,
  event: ClusterEvent,
  now: number,
  opened: (trigger: CheckedTrigger, computed: readonly NewEvent[]) => OpenCheck,
): OpenCheck | undefined {
  {
    if (event.type === 'PinStaged') {
      return opened(
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
      ? opened('pinChange', pinChangeEvents(state, event).events)
      : undefined;
  }
}

function reopenReport(
  state: ClusterState,
  event: ClusterEvent,
  opened: (trigger: CheckedTrigger, computed: readonly NewEvent[]) => OpenCheck,
): OpenCheck | undefined {
  switch (event.type) {
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
      return opened(
        'statusReport',
        decide('statusReport', state, { report, holderAnswers: false }).events,
      );
    }
    case 'WorkerUtilization':
      return opened(
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
        }).events,
      );
    case 'ContainerStateChanged':
      return opened(
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
  return (
    event.cause === check.cause &&
    event.type !== 'Snapshot' &&
    check.recorded.length < Math.max(1, check.computed.length)
  );
}

/** The result of a check whose recorded events are all in. */
export function settleCheck(check: OpenCheck): DecisionResult {
  const recordedEvents = check.recorded.map(decisionFields);
  const computedEvents = check.computed.map(decisionFields);
  const divergence = firstDifference(recordedEvents, computedEvents);
  return {
    seq: check.seq,
    at: check.at,
    trigger: check.trigger,
    cause: check.cause,
    recorded: divergence === null ? 'match' : 'diverged',
    recordedEvents,
    computedEvents,
    divergence,
  };
}
