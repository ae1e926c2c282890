/**
 * The admission queue as `readie status` and `TenantService.OwnQueue` show it (pure: read from
 * the folded state). Per tenant: the calls waiting, the oldest one's time, the slots it holds
 * beside its fair share (the capacity divided by the listed tenants' weights) and its quota's caps.
 */
import { queueing, queueTenant, slotsHeld, slotsHeldBy } from '../../core/admission/index.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { compareText, isPlaceable } from '../../projections/queries.js';
import { quotaOf } from '../../projections/quota-state.js';
import type { TenantQueueView } from '../../proto/gen/readie/v1/admin.js';
import type { OwnQueueResponse, OwnQueuedCall } from '../../proto/gen/readie/v1/tenant.js';

/** The ready workers' container limits summed; null when a ready worker reported none. */
function containerSlots(state: ClusterState): number | null {
  let slots = 0;
  for (const worker of state.workers.values()) {
    if (!isPlaceable(worker) || worker.status !== 'ready') continue;
    if (worker.maxContainers === null) return null;
    slots += worker.maxContainers;
  }
  return slots;
}

/** Every tenant that has calls waiting or holds slots, by tenant ID. */
export function queueViews(state: ClusterState): TenantQueueView[] {
  const held = slotsHeld(state);
  const waiting = new Map<string, { depth: number; oldest: string }>();
  for (const call of state.queue.values()) {
    const tenant = queueTenant(call.tenantId);
    const seen = waiting.get(tenant);
    // The queue is in the order queued: the first call seen of a tenant is its oldest.
    if (seen === undefined) waiting.set(tenant, { depth: 1, oldest: call.at });
    else seen.depth += 1;
  }
  const tenants = [...new Set([...held.keys(), ...waiting.keys()])].sort(compareText);
  const capacity = containerSlots(state);
  const quotas = new Map(tenants.map((tenantId) => [tenantId, quotaOf(state.quotas, tenantId)]));
  let weights = 0;
  for (const quota of quotas.values()) weights += quota.weight;
  return tenants.map((tenantId) => {
    const quota = quotas.get(tenantId)!;
    return {
      tenantId,
      depth: waiting.get(tenantId)?.depth ?? 0,
      oldestQueuedAt: waiting.get(tenantId)?.oldest ?? '',
      slotsHeld: held.get(tenantId) ?? 0,
      weight: quota.weight,
      fairShare: capacity === null ? undefined : (capacity * quota.weight) / weights,
      maxSlots: quota.maxSlots ?? undefined,
      maxQueued: quota.maxQueued,
    };
  });
}

/**
 * One tenant's own queued calls (`tenantId` null: calls without a tenant), oldest first, each
 * with its position in the tenant's line; `requestId` non-empty: that call alone, if queued.
 * Nothing of another tenant's calls is read into the answer.
 */
export function ownQueue(
  state: ClusterState,
  tenantId: string | null,
  requestId: string,
): OwnQueueResponse {
  const tenant = queueTenant(tenantId);
  const calls: OwnQueuedCall[] = [];
  let position = 0;
  for (const call of state.queue.values()) {
    if (queueTenant(call.tenantId) !== tenant) continue;
    if (requestId === '' || call.requestId === requestId) {
      calls.push({
        requestId: call.requestId,
        sessionId: call.sessionId ?? '',
        queuedAt: call.at,
        position,
      });
    }
    position += 1;
  }
  return {
    tenantId: tenantId ?? '',
    calls,
    depth: position,
    slotsHeld: slotsHeldBy(state, tenantId),
    maxQueued: quotaOf(state.quotas, tenantId).maxQueued,
    queueTimeoutMs: queueTimeoutMs(state),
  };
}

/**
 * Whether calls of any tenant but `tenantId` (or of no tenant, for a tenant) wait in the admission
 * queue now: one bit of the others' state, so a map can give its slots' containers back between
 * batches while they wait (docs/clients.md, "Concurrency follows the cluster").
 */
export function othersWaiting(state: ClusterState, tenantId: string | null): boolean {
  const own = queueTenant(tenantId);
  for (const [tenant, queue] of state.admission.queues) {
    if (tenant !== own && queue.count > 0) return true;
  }
  return false;
}

/** The `QUEUE_TIMEOUT` in force, in ms; 0 when the router does not queue. */
export function queueTimeoutMs(state: ClusterState): number {
  return queueing(state, state.config) ? state.config.QUEUE_TIMEOUT : 0;
}
