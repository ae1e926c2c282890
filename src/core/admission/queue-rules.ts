/**
 * Whether the admission queue is in force (docs/placement.md, "The admission queue"): under the
 * admission rules (rules version 5 or later recorded by the log) with a `QUEUE_TIMEOUT` above 0.
 * A log recorded before the queue existed records no `QUEUE_TIMEOUT` (which reads as 0) or an
 * older rules version: it replays with no queue, every call that finds no room refused at once.
 */
import { queueTenant } from '../../projections/admission-index.js';
import type { ClusterState, QueuedCall } from '../../projections/cluster-state.js';
import { DEFAULT_MAX_QUEUED, quotaOf } from '../../projections/quota-state.js';
import type { Config } from '../../shared/config.js';
import { decidesAdmission, rulesSteps, type CallToPlace } from '../placement/index.js';
import { slotsHeldBy } from './fair-order.js';

/** Whether a call that does not fit now waits in the queue (else it is refused at once). */
export function queueing(state: ClusterState, config: Config): boolean {
  return config.QUEUE_TIMEOUT > 0 && decidesAdmission(state.rulesVersion);
}

export { queueTenant };

/** How many calls of `tenantId` (calls without a tenant: null) wait in the queue (O(1)). */
export function queuedCount(state: ClusterState, tenantId: string | null): number {
  return state.admission.queues.get(queueTenant(tenantId))?.count ?? 0;
}

/** The calls one tenant may have waiting in the queue unless its quota says otherwise. */
export const MAX_QUEUED = DEFAULT_MAX_QUEUED;

/**
 * Why a call of `tenantId` may not wait (its tenant's queue holds its quota's `maxQueued` calls,
 * 2,000 by default), or null when it may: refused at once, `RESOURCE_EXHAUSTED` with a
 * retry-after hint.
 */
export function queueFull(
  state: ClusterState,
  tenantId: string | null,
  config: Config,
): string | null {
  const waiting = queuedCount(state, tenantId);
  const { maxQueued } = quotaOf(state.quotas, tenantId);
  if (waiting < maxQueued) return null;
  const who = tenantId === null ? 'calls without a tenant' : `tenant ${tenantId}`;
  return (
    `the admission queue holds ${waiting} call${waiting === 1 ? '' : 's'} of ${who}, the most it keeps (maxQueued ${maxQueued}): ` +
    `retry in ${config.ROUTING_RETRY_AFTER}ms`
  );
}

/**
 * Why a call of `tenantId` that needs a new slot must wait for its tenant's slot cap (it holds
 * its quota's `maxSlots`), or null when it may take one.
 */
export function slotCapReached(state: ClusterState, tenantId: string | null): string | null {
  const { maxSlots } = quotaOf(state.quotas, tenantId);
  if (maxSlots === null) return null;
  const held = slotsHeldBy(state, tenantId);
  if (held < maxSlots) return null;
  return `tenant ${tenantId ?? ''} holds ${held} slot${held === 1 ? '' : 's'}, its quota's maxSlots ${maxSlots}`;
}

/**
 * A queued call as placement sees it. Under rules 8 (`prefersImageHolders`) with its image key as
 * requested (it is admitted to a worker that holds its image, as it would have been placed at its
 * request). Under rules 9 (`queuesPinnedCalls`) also with its caller's deadline as requested (a
 * cold load it would not wait for is shed at admission as at its request) and, for a pinned call,
 * the table revision it was queued under (it is admitted by that version, whatever flips came
 * while it waited); under earlier rules as they decided it.
 */
export function callOf(state: ClusterState, queued: QueuedCall): CallToPlace {
  const steps = rulesSteps(state.rulesVersion);
  // Written out field by field (the same fields, in the same order, as a spread gave): an object
  // spread followed by more fields costs V8 microseconds, and admission makes one per head.
  const { requestId, sessionId, tenantId, demand, retryOf } = queued;
  const imageKey = queued.imageKey ?? null;
  if (!steps.queuesPinnedCalls) {
    return steps.prefersImageHolders
      ? { requestId, sessionId, tenantId, demand, retryOf, imageKey }
      : { requestId, sessionId, tenantId, demand, retryOf };
  }
  const deadlineMs = queued.deadlineMs ?? null;
  const queuedRevision = queued.revision ?? null;
  return steps.prefersImageHolders
    ? { requestId, sessionId, tenantId, demand, retryOf, imageKey, deadlineMs, queuedRevision }
    : { requestId, sessionId, tenantId, demand, retryOf, deadlineMs, queuedRevision };
}
