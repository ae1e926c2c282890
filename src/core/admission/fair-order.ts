/**
 * The fair order of admission (docs/placement.md, "The admission queue"): within a tenant, first
 * come first served; across tenants, the head of the tenant whose usage share is lowest first:
 * slots held (calls in flight plus idle containers kept for its sessions) divided by its weight
 * (1 for every tenant until quotas give weights), ties by tenant ID (as text).
 */
import type { ClusterState, QueuedCall } from '../../projections/cluster-state.js';
import { queueTenant } from './queue-rules.js';

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
export function slotsHeld(state: ClusterState): Map<string, number> {
  const held = new Map<string, number>();
  const busySessions = new Set<string>();
  for (const reservation of state.reservations.values()) {
    const tenant = queueTenant(reservation.tenantId);
    held.set(tenant, (held.get(tenant) ?? 0) + 1);
    if (reservation.sessionId !== null) busySessions.add(reservation.sessionId);
  }
  for (const session of state.sessions.values()) {
    if (session.pin === null || session.expired !== null) continue;
    if (busySessions.has(session.sessionId)) continue;
    const tenant = queueTenant(session.tenantId);
    held.set(tenant, (held.get(tenant) ?? 0) + 1);
  }
  return held;
}

/** The tenants with queued calls, in the order their heads are offered a slot. */
export function fairOrder(state: ClusterState): TenantTurn[] {
  if (state.queue.size === 0) return [];
  // The queue is in the order queued (seq), so the first call seen of a tenant is its head.
  const heads = new Map<string, QueuedCall>();
  const counts = new Map<string, number>();
  for (const call of state.queue.values()) {
    const tenant = queueTenant(call.tenantId);
    const count = counts.get(tenant);
    if (count === undefined) {
      heads.set(tenant, call);
      counts.set(tenant, 1);
    } else counts.set(tenant, count + 1);
  }
  const held = slotsHeld(state);
  const turns: TenantTurn[] = [];
  for (const [tenant, head] of heads) {
    const slots = held.get(tenant) ?? 0;
    turns.push({ tenant, head, held: slots, share: slots, queued: counts.get(tenant) ?? 0 });
  }
  return turns.sort((a, b) =>
    a.share !== b.share
      ? a.share - b.share
      : a.tenant < b.tenant
        ? -1
        : a.tenant > b.tenant
          ? 1
          : 0,
  );
}
