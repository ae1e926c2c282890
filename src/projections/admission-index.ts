/**
 * What admission asks of the state again and again, kept by the fold as it goes
 * (docs/placement.md, "The admission queue"): each tenant's queued calls in the order queued (its
 * head, its count) and the slots each tenant holds (calls in flight, plus idle containers kept
 * for its sessions). Derived from the queue, the reservations and the sessions alone, so a
 * snapshot carries none of it and reading one derives it again (`admissionIndexOf`); the fold
 * keeps it in step event by event, so the fair order costs O(tenants) instead of a walk of the
 * whole queue and every reservation.
 */
import type { Draft } from 'immer';
import { emptyAdmissionIndex, type AdmissionIndex } from './admission-state.js';
import type { ClusterState, QueuedCall, Reservation, SessionRecord } from './cluster-state.js';

export * from './admission-state.js';

type State = Draft<ClusterState>;
type Index = Draft<AdmissionIndex>;

/** The tenant a call queues and holds slots as: its own, or `` for calls without one. */
export function queueTenant(tenantId: string | null | undefined): string {
  return tenantId ?? '';
}

/** The index of `state`, derived from its records (a snapshot's, or a check of the fold's). */
export function admissionIndexOf(
  state: Pick<ClusterState, 'queue' | 'reservations' | 'sessions'>,
): AdmissionIndex {
  const index = emptyAdmissionIndex() as Index;
  for (const call of state.queue.values()) linkQueued(index, call);
  for (const reservation of state.reservations.values()) {
    moveHeld(index, queueTenant(reservation.tenantId), 1);
    if (reservation.sessionId !== null) moveCount(index.sessionCalls, reservation.sessionId, 1);
  }
  for (const session of state.sessions.values()) {
    moveHeld(index, queueTenant(session.tenantId), keepsIdleSlot(index, session));
  }
  return index;
}

/** Appends `call` (just queued) to its tenant's queue. */
export function indexQueued(state: State, call: QueuedCall): void {
  linkQueued(state.admission, call);
}

/** Takes call `requestId` (admitted, or gone) out of its tenant's queue, if it is queued. */
export function unindexQueued(state: State, call: QueuedCall | undefined): void {
  if (call === undefined) return;
  const index = state.admission;
  const link = index.links.get(call.requestId);
  if (link === undefined) return;
  index.links.delete(call.requestId);
  const tenant = queueTenant(call.tenantId);
  const queue = index.queues.get(tenant);
  if (queue === undefined) return;
  if (queue.count <= 1) {
    index.queues.delete(tenant);
    return;
  }
  const { previous, next } = link;
  if (previous !== null) linkNext(index, previous, next);
  if (next !== null) linkPrevious(index, next, previous);
  index.queues.set(tenant, {
    head: previous === null ? (next as string) : queue.head,
    tail: next === null ? (previous as string) : queue.tail,
    count: queue.count - 1,
  });
}

/** A reservation was made (`delta` 1) or taken away (-1): its tenant's and session's counts move. */
export function indexReservation(
  state: State,
  reservation: Pick<Reservation, 'tenantId' | 'sessionId'>,
  delta: 1 | -1,
): void {
  const index = state.admission;
  moveHeld(index, queueTenant(reservation.tenantId), delta);
  const { sessionId } = reservation;
  if (sessionId === null) return;
  const session = state.sessions.get(sessionId);
  const before = session === undefined ? 0 : keepsIdleSlot(index, session);
  moveCount(index.sessionCalls, sessionId, delta);
  if (session === undefined) return;
  moveHeld(index, queueTenant(session.tenantId), keepsIdleSlot(index, session) - before);
}

/**
 * Changes session `session` by `change` (its pin, its expiry), moving its tenant's slots held by
 * what the change made of the idle slot it keeps.
 */
export function changeSession(
  state: State,
  session: Draft<SessionRecord>,
  change: () => void,
): void {
  const index = state.admission;
  const before = keepsIdleSlot(index, session);
  change();
  moveHeld(index, queueTenant(session.tenantId), keepsIdleSlot(index, session) - before);
}

/** 1 when `session` keeps an idle container for its tenant: pinned, live, no call in flight. */
function keepsIdleSlot(
  index: Pick<AdmissionIndex, 'sessionCalls'>,
  session: Pick<SessionRecord, 'sessionId' | 'pin' | 'expired'>,
): number {
  return session.pin !== null &&
    session.expired === null &&
    !index.sessionCalls.has(session.sessionId)
    ? 1
    : 0;
}

function linkQueued(index: Index, call: QueuedCall): void {
  const tenant = queueTenant(call.tenantId);
  const queue = index.queues.get(tenant);
  if (queue === undefined) {
    index.queues.set(tenant, { head: call.requestId, tail: call.requestId, count: 1 });
    index.links.set(call.requestId, { previous: null, next: null });
    return;
  }
  linkNext(index, queue.tail, call.requestId);
  index.links.set(call.requestId, { previous: queue.tail, next: null });
  index.queues.set(tenant, { head: queue.head, tail: call.requestId, count: queue.count + 1 });
}

// A new link, field by field: the fold relinks on every call queued or admitted, and a spread
// followed by more fields costs V8 microseconds.
function linkNext(index: Index, requestId: string, next: string | null): void {
  const link = index.links.get(requestId);
  if (link !== undefined) index.links.set(requestId, { previous: link.previous, next });
}

function linkPrevious(index: Index, requestId: string, previous: string | null): void {
  const link = index.links.get(requestId);
  if (link !== undefined) index.links.set(requestId, { previous, next: link.next });
}

function moveHeld(index: Index, tenant: string, delta: number): void {
  moveCount(index.held, tenant, delta);
}

/** Moves `key`'s count by `delta`, keeping only counts above 0 (so the map is a function of the records). */
function moveCount(counts: Map<string, number>, key: string, delta: number): void {
  if (delta === 0) return;
  const count = (counts.get(key) ?? 0) + delta;
  if (count > 0) counts.set(key, count);
  else counts.delete(key);
}
