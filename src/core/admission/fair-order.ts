/**
 * The fair order of admission (docs/placement.md, "The admission queue"): within a tenant, first
 * come first served; across tenants, the head of the tenant whose usage share is lowest first:
 * slots held (calls in flight plus idle containers kept for its sessions) divided by its weight
 * (its quota's, 1 by default: docs/quotas.md), ties by tenant ID (as text).
 */
import type { ClusterState, QueuedCall } from '../../projections/cluster-state.js';
import { queueTenant } from '../../projections/admission-index.js';
import { quotaOf } from '../../projections/quota-state.js';

/** A tenant with queued calls: its head, and its share when the order was taken. */
export interface TenantTurn {
  /** The tenant (`` for calls without one). */
  readonly tenant: string;
  /** Its oldest queued call. */
  readonly head: QueuedCall;
  /** Slots it holds now: calls in flight plus idle containers kept for its sessions. */
  readonly held: number;
  /** `held / weight`. */
  readonly share: number;
  /** Calls it has queued. */
  readonly queued: number;
}

/** Slots each tenant holds: its calls in flight, and its sessions' idle containers. */
export function slotsHeld(state: ClusterState): ReadonlyMap<string, number> {
  return state.admission.held;
}

/** Slots `tenantId` holds (calls without a tenant: null), O(1). */
export function slotsHeldBy(state: ClusterState, tenantId: string | null): number {
  return state.admission.held.get(queueTenant(tenantId)) ?? 0;
}

/**
 * The tenants with queued calls, in the order their heads are offered a slot: O(tenants), from
 * the index the fold keeps (`ClusterState.admission`), not a walk of the queue.
 */
export function fairOrder(state: ClusterState): TenantTurn[] {
  const { queues, held } = state.admission;
  if (queues.size === 0) return [];
  const turns: TenantTurn[] = [];
  for (const [tenant, queue] of queues) {
    const head = state.queue.get(queue.head);
    if (head === undefined) continue;
    const slots = held.get(tenant) ?? 0;
    const { weight } = quotaOf(state.quotas, tenant);
    turns.push({ tenant, head, held: slots, share: slots / weight, queued: queue.count });
  }
  return turns.sort(byShare);
}

/** Lowest share first, then tenant ID as text. */
function byShare(a: TenantTurn, b: TenantTurn): number {
  if (a.share !== b.share) return a.share - b.share;
  return a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : 0;
}
