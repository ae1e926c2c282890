/**
 * Whether the admission queue is in force (docs/placement.md, "The admission queue"): under the
 * admission rules (rules version 5 or later recorded by the log) with a `QUEUE_TIMEOUT` above 0.
 * A log recorded before the queue existed records no `QUEUE_TIMEOUT` (which reads as 0) or an
 * older rules version: it replays with no queue, every call that finds no room refused at once.
 */
import { queueTenant } from '../../projections/admission-index.js';
import type { ClusterState, QueuedCall } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { decidesAdmission, type CallToPlace } from '../placement/index.js';

/** Whether a call that does not fit now waits in the queue (else it is refused at once). */
export function queueing(state: ClusterState, config: Config): boolean {
  return config.QUEUE_TIMEOUT > 0 && decidesAdmission(state.rulesVersion);
}

export { queueTenant };

/** How many calls of `tenantId` (calls without a tenant: null) wait in the queue (O(1)). */
export function queuedCount(state: ClusterState, tenantId: string | null): number {
  return state.admission.queues.get(queueTenant(tenantId))?.count ?? 0;
}

/** The calls one tenant may have waiting in the queue (`maxQueued`'s default). */
export const MAX_QUEUED = 2_000;

/**
 * Why a call of `tenantId` may not wait (its tenant's queue holds `MAX_QUEUED` calls), or null
 * when it may: refused at once, `RESOURCE_EXHAUSTED` with a retry-after hint.
 */
export function queueFull(
  state: ClusterState,
  tenantId: string | null,
  config: Config,
): string | null {
  const waiting = queuedCount(state, tenantId);
  if (waiting < MAX_QUEUED) return null;
  const who = tenantId === null ? 'calls without a tenant' : `tenant ${tenantId}`;
  return (
    `the admission queue holds ${waiting} calls of ${who}, the most it keeps (maxQueued ${MAX_QUEUED}): ` +
    `retry in ${config.ROUTING_RETRY_AFTER}ms`
  );
}

/** A queued call as placement sees it. */
export function callOf(queued: QueuedCall): CallToPlace {
  return {
    requestId: queued.requestId,
    sessionId: queued.sessionId,
    tenantId: queued.tenantId,
    demand: queued.demand,
    retryOf: queued.retryOf,
  };
}
