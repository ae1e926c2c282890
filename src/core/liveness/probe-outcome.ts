/**
 * What a health probe's result means, as events (pure). Only probes prove that the router can
 * reach a worker (a report proves the reverse), so only probe results move the count: a failed
 * probe (or a failed dial of a call's stream, `dial-failure.ts`) appends `WorkerProbeFailed` with
 * the count of consecutive failures the log holds plus one and, once that count reaches
 * `PROBE_FAILURE_THRESHOLD`, the eviction and its consequences (a worker that had said it was
 * leaving is evicted as `left`); a probe that succeeds after failures appends
 * `WorkerProbeSucceeded`, which resets the count in the log, so replay counts as the router did.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { evictionEvents, liveWorkerOf, seqAfter } from '../consequences/index.js';
import type { Decision } from '../decision.js';

/** The consecutive failure count after one more failure: the log's count plus one. */
export function nextProbeFailureCount(state: ClusterState, workerId: string): number {
  return (state.workers.get(workerId)?.probeFailures ?? 0) + 1;
}

/**
 * The events of one more failed probe of `workerId`, counted from the log; empty if the worker is
 * unknown or evicted. `seq`: where the first of them is appended (the decision's first event by
 * default).
 */
export function probeFailureEvents(
  state: ClusterState,
  workerId: string,
  error: string | null,
  config: Config = state.config,
  seq: number = seqAfter(state),
): NewEvent[] {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return [];
  const consecutive = nextProbeFailureCount(state, workerId);
  const events: NewEvent[] = [{ type: 'WorkerProbeFailed', workerId, consecutive, error }];
  if (consecutive >= Math.max(1, config.PROBE_FAILURE_THRESHOLD)) {
    const reason = worker.status === 'leaving' ? 'left' : 'probe';
    events.push(...evictionEvents(state, workerId, reason, seq + events.length));
  }
  return events;
}

/** A failed probe of a worker, as the prober saw it. */
export interface ProbeFailureInput {
  readonly workerId: string;
  /** What the health check said. */
  readonly error: string | null;
  /** Default: the config in force. */
  readonly config?: Config;
}

/** A failed probe's decision, and the consecutive count it records. */
export interface ProbeFailureDecision extends Decision {
  readonly consecutive: number;
}

/** A health probe failed: `probeFailureEvents` (`probe:WORKER`). */
export function decideProbeFailure(
  state: ClusterState,
  input: ProbeFailureInput,
): ProbeFailureDecision {
  const { workerId, error } = input;
  return {
    cause: { kind: 'probe', workerId },
    events: probeFailureEvents(state, workerId, error, input.config ?? state.config),
    consecutive: nextProbeFailureCount(state, workerId),
  };
}

/** A successful probe of a worker. */
export interface ProbeSuccessInput {
  readonly workerId: string;
}

/**
 * A health probe succeeded: `WorkerProbeSucceeded` when the log counts failures for the worker
 * (the reset is in the log), else nothing (`probe:WORKER`).
 */
export function decideProbeSuccess(state: ClusterState, input: ProbeSuccessInput): Decision {
  const worker = liveWorkerOf(state, input.workerId);
  const failing = worker !== undefined && worker.probeFailures > 0;
  return {
    cause: { kind: 'probe', workerId: input.workerId },
    events: failing ? [{ type: 'WorkerProbeSucceeded', workerId: input.workerId }] : [],
  };
}
