/**
 * Causes and their consequences, as events (docs/event-log.md): the one owner of what follows
 * from what. The router appends both, so a log reads as a complete story, and the fold applies
 * events only (it implies no consequence: a log written before it appended every one is upcast,
 * `src/events/upcast.ts`). Each function reads the state before the cause and returns the cause
 * followed by its consequences, or nothing when the cause would change nothing (a worker already
 * evicted, a container already gone): nothing is evicted, forgotten or released twice.
 *
 * A session's expiry names the seq of the event that ended it (`SessionExpired.causeSeq`: the
 * eviction, the removal, or the report that dropped its container), the seq its refusals say. A
 * decision's events are appended right after the state it was decided on, so the caller, which
 * knows where its cause stands among them, says which seq it takes (`seqAfter`).
 */
import type {
  ContainerForgetReason,
  EvictionReason,
  SessionExpiryReason,
  SessionUnpinReason,
} from '../../events/schema.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import { isLive } from '../../projections/queries.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { boundedRaised, type Raised } from '../../shared/raised.js';

/**
 * The seq the next event of a decision takes, when `before` are the decision's events before it:
 * a decision's events are appended right after the state they were decided on.
 */
export function seqAfter(state: ClusterState, before: readonly unknown[] = []): number {
  return state.lastSeq + 1 + before.length;
}

/** A worker that exists and is live (`isLive`): the only kind events can still change. */
export function liveWorkerOf(state: ClusterState, workerId: string): WorkerRecord | undefined {
  const worker = state.workers.get(workerId);
  return worker && isLive(worker) ? worker : undefined;
}

/**
 * Evicting a worker: `WorkerEvicted` (appended at `seq`), then `SessionExpired`
 * (`worker_evicted`) for every session pinned to one of its containers. Nothing for a worker that
 * is unknown or already evicted.
 */
export function evictionEvents(
  state: ClusterState,
  workerId: string,
  reason: EvictionReason,
  seq: number,
): NewEvent[] {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return [];
  const events: NewEvent[] = [{ type: 'WorkerEvicted', workerId, reason }];
  for (const sessionId of worker.pinnedSessions.values()) {
    events.push({ type: 'SessionExpired', sessionId, reason: 'worker_evicted', causeSeq: seq });
  }
  return events;
}

/** `SessionExpired` for the session pinned to a container, if any, ended by the event at `seq`. */
function expirePinned(
  worker: WorkerRecord,
  containerId: string,
  reason: SessionExpiryReason,
  seq: number,
): NewEvent[] {
  const sessionId = worker.pinnedSessions.get(containerId);
  return sessionId === undefined
    ? []
    : [{ type: 'SessionExpired', sessionId, reason, causeSeq: seq }];
}

/**
 * A worker reported a container removed (alone, or by a full report that no longer lists it):
 * `ContainerStateChanged` (`removed`), then `SessionExpired` (`container_removed`) for the session
 * pinned there, ended by the event at `seq` (the removal, or the full report that dropped it).
 * Nothing for a worker that is unknown or evicted, nor for a container the router holds no record
 * and no session of: it is gone already (a full report taken while the worker tore it down
 * dropped it, and its own removal report came after), so a removal is logged once.
 */
export function containerRemovedEvents(
  state: ClusterState,
  workerId: string,
  containerId: string,
  checkpointId: string | null,
  reportSeq: number | null,
  seq: number,
): NewEvent[] {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return [];
  // A session container never reported (rules 7 on) holds a slot: its removal frees it.
  if (
    !worker.containers.has(containerId) &&
    !worker.pinnedSessions.has(containerId) &&
    !worker.sessionContainers.has(containerId)
  ) {
    return [];
  }
  return [
    {
      type: 'ContainerStateChanged',
      workerId,
      containerId,
      state: 'removed',
      checkpointId,
      reportSeq,
    },
    ...expirePinned(worker, containerId, 'container_removed', seq),
  ];
}

/**
 * The reaper drops a container record: `ContainerForgotten` (appended at `seq`), then
 * `SessionExpired` (`container_forgotten`) for the session pinned there. Nothing for a container
 * the router holds no record and no session of. (The reaper forgets only records; a session
 * pinned to a container never reported, which a log may forget, expires the same way.)
 */
export function forgetContainerEvents(
  state: ClusterState,
  workerId: string,
  containerId: string,
  reason: ContainerForgetReason,
  seq: number,
): NewEvent[] {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return [];
  if (!worker.containers.has(containerId) && !worker.pinnedSessions.has(containerId)) return [];
  return [
    { type: 'ContainerForgotten', workerId, containerId, reason },
    ...expirePinned(worker, containerId, 'container_forgotten', seq),
  ];
}

/** `SessionUnpinned` when releasing `requestId` as failed clears its session's pin. */
function unpinIfCreator(
  state: ClusterState,
  requestId: string,
  reason: SessionUnpinReason,
): NewEvent[] {
  const reservation = state.reservations.get(requestId);
  if (!reservation || reservation.sessionId === null) return [];
  const session = state.sessions.get(reservation.sessionId);
  if (!session || session.pin === null || session.pinnedBy !== requestId) return [];
  return [{ type: 'SessionUnpinned', sessionId: session.sessionId, reason }];
}

/** The longest failure message a `CallFinished` keeps (UTF-16 units); longer ones are cut. */
export const MAX_FINISHED_MESSAGE_LENGTH = 1024;

/** `message` cut to {@link MAX_FINISHED_MESSAGE_LENGTH}, saying so. */
function boundedMessage(message: string): string {
  if (message.length <= MAX_FINISHED_MESSAGE_LENGTH) return message;
  return `${message.slice(0, MAX_FINISHED_MESSAGE_LENGTH - 20)}... (cut)`;
}

/**
 * A call ended: `CallFinished` (`ok` when `code` is null, else the code it ended with and the
 * message its client heard; an OK call whose function raised names what, bounded; an OK batch
 * how many of its inputs raised, as its worker said), then
 * `SessionUnpinned` (`call_failed`) when it failed and had created its session's pin. Always
 * returns `CallFinished`, even when the reservation was already force-released: every call that
 * was placed finishes exactly once in the log.
 */
export function callFinishedEvents(
  state: ClusterState,
  requestId: string,
  code: GrpcCodeName | null,
  message: string | null = null,
  raised: Raised | null = null,
  inputsRaised: number | null = null,
): NewEvent[] {
  const ok = code === null || code === 'OK';
  return [
    {
      type: 'CallFinished',
      requestId,
      ok,
      code: ok ? null : code,
      message: ok || message === null ? null : boundedMessage(message),
      raised: ok && raised !== null ? boundedRaised(raised) : null,
      inputsRaised: ok ? inputsRaised : null,
    },
    ...(ok ? [] : unpinIfCreator(state, requestId, 'call_failed')),
  ];
}

/**
 * Force-releasing a reservation (stale, or in flight when the router died): `ReservationExpired`,
 * then `SessionUnpinned` (`reservation_expired`) when the call had created its session's pin.
 * Nothing when there is no such reservation.
 */
export function reservationExpiredEvents(state: ClusterState, requestId: string): NewEvent[] {
  if (!state.reservations.has(requestId)) return [];
  return [
    { type: 'ReservationExpired', requestId },
    ...unpinIfCreator(state, requestId, 'reservation_expired'),
  ];
}
