/**
 * What a failed health probe means, as events (pure): `WorkerProbeFailed` with the count of
 * consecutive failures and, once that count reaches `PROBE_FAILURE_THRESHOLD`, the eviction and
 * its consequences. A worker that had said it was leaving is evicted as `left`.
 */
import { causeOf } from '../../events/cause.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { evictionEvents, liveWorkerOf } from '../consequences/index.js';
import type { Decision } from '../decision.js';

/**
 * The consecutive failure count after one more failure. `streak` is what the prober counted since
 * the worker last answered a probe (undefined when it has not probed it since the router
 * started); the state's count resets whenever the worker reports, so the smaller one is current.
 */
export function nextProbeFailureCount(
  state: ClusterState,
  workerId: string,
  streak: number | undefined,
): number {
  const recorded = state.workers.get(workerId)?.probeFailures ?? 0;
  return Math.min(streak ?? recorded, recorded) + 1;
}

/** The events of a failed probe of `workerId`; empty if the worker is unknown or evicted. */
export function probeFailureEvents(
  state: ClusterState,
  workerId: string,
  consecutive: number,
  error: string | null,
  config: Config = state.config,
): NewEvent[] {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return [];
  const events: NewEvent[] = [{ type: 'WorkerProbeFailed', workerId, consecutive, error }];
  if (consecutive >= Math.max(1, config.PROBE_FAILURE_THRESHOLD)) {
    events.push(...evictionEvents(state, workerId, worker.status === 'leaving' ? 'left' : 'probe'));
  }
  return events;
}

/** A failed probe of a worker, as the prober saw it. */
export interface ProbeFailureInput {
  readonly workerId: string;
  /** Consecutive failures the prober counted since the worker last answered (see above). */
  readonly streak: number | undefined;
  /** What the health check said. */
  readonly error: string | null;
  /** Default: the config in force. */
  readonly config?: Config;
}

/** A failed probe's decision, and the consecutive count it records. */
export interface ProbeFailureDecision extends Decision {
  readonly consecutive: number;
}

/** A health probe failed: `probeFailureEvents` with the next count (`probe:WORKER`). */
export function decideProbeFailure(
  state: ClusterState,
  input: ProbeFailureInput,
): ProbeFailureDecision {
  const { workerId, error } = input;
  const consecutive = nextProbeFailureCount(state, workerId, input.streak);
  return {
    cause: causeOf('probe', workerId),
    events: probeFailureEvents(state, workerId, consecutive, error, input.config ?? state.config),
    consecutive,
  };
}
