/**
 * How each event changes the cluster state. `applyEvent` is the one recipe, written as an immer
 * recipe over a draft; `evolve` runs it under immer's `produce` (a new immutable state per event),
 * and long folds run it over a private working copy (see `fold.ts`).
 *
 * Consequences are folded with their causes (an eviction expires the sessions pinned to the
 * worker; a removed container expires its session; a failed call that created its session's pin
 * clears it), so a log that also holds the consequence events folds to the same state: those
 * events find the work already done and change nothing.
 *
 * Over a working copy whose workers map someone watches (`worker-changes.ts`), a worker that
 * changes is always a new object: `workerToChange` replaces the record by a shallow copy before
 * changing it and notes the change for the watcher. Placement's sorted candidates rely on both:
 * the journal says which workers moved, and the record it saw last still holds the key it sorted
 * them by (`core/placement/candidate-order.ts`). An unwatched working copy (a fold) changes
 * records in place; immer copies what a draft touches anyway.
 */
import { enableMapSet, produce, type Draft } from 'immer';
import type { SessionExpiryReason } from '../events/schema.js';
import type { EventOf } from '../events/types.js';
import { assertNever, type ClusterEvent } from '../events/types.js';
import { configInForce } from '../shared/config.js';
import type { ClusterState, SessionRecord, WorkerRecord } from './cluster-state.js';
import { restoreSnapshot } from './snapshot.js';
import { isWatched, noteWorkerChange } from './worker-changes.js';

enableMapSet();

type State = Draft<ClusterState>;
type Worker = Draft<WorkerRecord>;

/** The state after `event`, as a new immutable state (immer `produce`). */
export function evolve(state: ClusterState, event: ClusterEvent): ClusterState {
  return produce(state, (draft): State | undefined => {
    const next = applyEvent(draft, event);
    return next === draft ? undefined : next;
  });
}

/**
 * Applies one event to a draft (or a private mutable state) and returns the state to continue
 * with: the same object, except for `Snapshot`, which replaces the whole state.
 */
export function applyEvent(state: State, event: ClusterEvent): State {
  copyOnWrite = isWatched(state.workers);
  copiedThisEvent.length = 0;
  switch (event.type) {
    case 'Snapshot':
      return restoreSnapshot(event) as unknown as State;
    case 'RouterStarted':
      state.config = configInForce(event.config);
      state.routerVersion = event.version;
      state.routerStartedAt = event.at;
      break;
    case 'CatalogueLoaded':
      state.catalogue = { revision: event.revision, catalogue: event.catalogue };
      break;
    case 'WorkerRegistered':
      registerWorker(state, event);
      break;
    case 'WorkerUtilization':
      reportUtilization(state, event);
      break;
    case 'WorkerLeaving': {
      const worker = liveWorker(state, event.workerId);
      if (worker) {
        worker.status = 'leaving';
        worker.lastHeardAt = event.at;
      }
      break;
    }
    case 'WorkerProbeFailed': {
      const worker = liveWorker(state, event.workerId);
      if (worker) worker.probeFailures = event.consecutive;
      break;
    }
    case 'WorkerEvicted':
      evictWorker(state, event);
      break;
    case 'ContainerStateChanged':
      changeContainer(state, event);
      break;
    case 'ContainerForgotten': {
      const worker = liveWorker(state, event.workerId);
      if (worker) dropContainer(state, worker, event.containerId, event, 'container_forgotten');
      break;
    }
    case 'CallRequested':
    case 'CallRejected':
      break;
    case 'CallPlaced':
      reserve(state, event);
      break;
    case 'CallBound': {
      const reservation = state.reservations.get(event.requestId);
      if (reservation) reservation.containerId = event.containerId;
      break;
    }
    case 'CallFinished':
      release(state, event.requestId, !event.ok);
      break;
    case 'ReservationExpired':
      release(state, event.requestId, true);
      break;
    case 'SessionPinned':
      pinSession(state, event);
      break;
    case 'SessionUnpinned': {
      const session = state.sessions.get(event.sessionId);
      if (session) unpin(state, session);
      break;
    }
    case 'SessionExpired':
      expireSession(state, event.sessionId, event.reason, event);
      break;
    default:
      assertNever(event, 'event type');
  }
  state.lastSeq = event.seq;
  return state;
}

/**
 * The worker's record, ready to be changed: under immer the draft itself; over a working copy a
 * shallow copy put in its place, so every changed worker is a new object (its containers and
 * pinned sessions maps are shared with the record it replaces, which nobody holds any more).
 */
function workerToChange(state: State, workerId: string): Worker | undefined {
  const worker = state.workers.get(workerId);
  return worker === undefined ? undefined : changing(state, worker);
}

/** `worker` itself, or over a watched map its copy put in its place (once per event). */
function changing(state: State, worker: Worker): Worker {
  if (!copyOnWrite || copiedThisEvent.includes(worker)) return worker;
  const copy = copyOfWorker(worker);
  state.workers.set(worker.workerId, copy);
  noteWorkerChange(state.workers, worker.workerId);
  copiedThisEvent.push(copy);
  return copy;
}

/** A shallow copy of a worker's record (every field written out: one object shape, fast). */
function copyOfWorker(worker: Worker): Worker {
  return {
    workerId: worker.workerId,
    address: worker.address,
    status: worker.status,
    error: worker.error,
    flavor: worker.flavor,
    memoryTotal: worker.memoryTotal,
    maxContainers: worker.maxContainers,
    gpuMemoryTotal: worker.gpuMemoryTotal,
    utilization: worker.utilization,
    reservedMemory: worker.reservedMemory,
    inFlight: worker.inFlight,
    probeFailures: worker.probeFailures,
    registeredAt: worker.registeredAt,
    lastHeardAt: worker.lastHeardAt,
    evictedReason: worker.evictedReason,
    containers: worker.containers,
    pinnedSessions: worker.pinnedSessions,
  };
}

/** Whether someone watches the workers map the current event changes (an immer draft's never is). */
let copyOnWrite = false;
/** The worker copies made while applying the current event (an event touches one or two). */
const copiedThisEvent: Worker[] = [];

/** A worker that exists and has not been evicted (events about others change nothing). */
function liveWorker(state: State, workerId: string): Worker | undefined {
  const worker = state.workers.get(workerId);
  return worker && worker.status !== 'evicted' ? changing(state, worker) : undefined;
}

function registerWorker(state: State, event: EventOf<'WorkerRegistered'>): void {
  const known = state.workers.get(event.workerId);
  const capacity = {
    address: event.address,
    status: event.status,
    error: event.error,
    flavor: event.flavor,
    memoryTotal: event.memoryTotal,
    maxContainers: event.maxContainers,
    gpuMemoryTotal: event.gpuMemoryTotal,
    probeFailures: 0,
    lastHeardAt: event.at,
    evictedReason: null,
  };
  if (known) {
    Object.assign(changing(state, known), capacity);
    return;
  }
  state.workers.set(event.workerId, {
    workerId: event.workerId,
    ...capacity,
    utilization: null,
    reservedMemory: 0,
    inFlight: 0,
    registeredAt: event.at,
    containers: new Map(),
    pinnedSessions: new Map(),
  });
  if (copyOnWrite) noteWorkerChange(state.workers, event.workerId);
}

function reportUtilization(state: State, event: EventOf<'WorkerUtilization'>): void {
  const worker = liveWorker(state, event.workerId);
  if (!worker) return;
  worker.utilization = {
    memoryUsed: event.memoryUsed,
    containerCount: event.containerCount,
    cpuUsed: event.cpuUsed,
    cpuTotal: event.cpuTotal,
    gpuMemoryUsed: event.gpuMemoryUsed,
    at: event.at,
  };
  worker.lastHeardAt = event.at;
  worker.probeFailures = 0;
}

function evictWorker(state: State, event: EventOf<'WorkerEvicted'>): void {
  const worker = liveWorker(state, event.workerId);
  if (!worker) return;
  for (const sessionId of [...worker.pinnedSessions.values()]) {
    expireSession(state, sessionId, 'worker_evicted', event);
  }
  worker.status = 'evicted';
  worker.evictedReason = event.reason;
  worker.containers.clear();
  worker.pinnedSessions.clear();
}

function changeContainer(state: State, event: EventOf<'ContainerStateChanged'>): void {
  const worker = liveWorker(state, event.workerId);
  if (!worker) return;
  worker.lastHeardAt = event.at;
  if (event.state === 'removed') {
    dropContainer(state, worker, event.containerId, event, 'container_removed');
    return;
  }
  const known = worker.containers.get(event.containerId);
  if (known) {
    if (known.state !== event.state) known.since = event.at;
    known.state = event.state;
    known.checkpointId = event.checkpointId;
    return;
  }
  worker.containers.set(event.containerId, {
    containerId: event.containerId,
    state: event.state,
    checkpointId: event.checkpointId,
    since: event.at,
  });
}

function dropContainer(
  state: State,
  worker: Worker,
  containerId: string,
  cause: ClusterEvent,
  reason: SessionExpiryReason,
): void {
  worker.containers.delete(containerId);
  const sessionId = worker.pinnedSessions.get(containerId);
  if (sessionId !== undefined) expireSession(state, sessionId, reason, cause);
}

function reserve(state: State, event: EventOf<'CallPlaced'>): void {
  if (state.reservations.has(event.requestId)) return;
  state.reservations.set(event.requestId, {
    requestId: event.requestId,
    sessionId: event.sessionId,
    workerId: event.workerId,
    containerId: event.containerId,
    checkpointId: event.checkpointId,
    memory: event.memory,
    since: event.at,
  });
  const worker = workerToChange(state, event.workerId);
  if (worker) {
    worker.inFlight += 1;
    worker.reservedMemory += event.memory;
  }
}

function release(state: State, requestId: string, failed: boolean): void {
  const reservation = state.reservations.get(requestId);
  if (!reservation) return;
  state.reservations.delete(requestId);
  const worker = workerToChange(state, reservation.workerId);
  if (worker) {
    worker.inFlight = Math.max(0, worker.inFlight - 1);
    worker.reservedMemory = Math.max(0, worker.reservedMemory - reservation.memory);
  }
  if (!failed || reservation.sessionId === null) return;
  const session = state.sessions.get(reservation.sessionId);
  if (session && session.pinnedBy === requestId) unpin(state, session);
}

function pinSession(state: State, event: EventOf<'SessionPinned'>): void {
  const session = sessionRecord(state, event.sessionId);
  if (session.expired) return;
  const samePin =
    session.pin?.workerId === event.workerId && session.pin.containerId === event.containerId;
  if (session.pin && samePin) {
    if (event.checkpointId !== null) session.pin.checkpointId = event.checkpointId;
    return;
  }
  unpin(state, session);
  session.pin = {
    workerId: event.workerId,
    containerId: event.containerId,
    checkpointId: event.checkpointId,
  };
  session.pinnedBy = event.requestId;
  workerToChange(state, event.workerId)?.pinnedSessions.set(event.containerId, event.sessionId);
}

function unpin(state: State, session: Draft<SessionRecord>): void {
  const pin = session.pin;
  if (pin) {
    const worker = state.workers.get(pin.workerId);
    if (worker && worker.pinnedSessions.get(pin.containerId) === session.sessionId) {
      workerToChange(state, pin.workerId)?.pinnedSessions.delete(pin.containerId);
    }
  }
  session.pin = null;
  session.pinnedBy = null;
}

function expireSession(
  state: State,
  sessionId: string,
  reason: SessionExpiryReason,
  cause: ClusterEvent,
): void {
  const session = sessionRecord(state, sessionId);
  if (session.expired) return;
  unpin(state, session);
  session.expired = { reason, at: cause.at, seq: cause.seq };
}

/** The session's record, created (unpinned, not expired) if the log never mentioned it. */
function sessionRecord(state: State, sessionId: string): Draft<SessionRecord> {
  const known = state.sessions.get(sessionId);
  if (known) return known;
  const created: SessionRecord = { sessionId, pin: null, pinnedBy: null, expired: null };
  state.sessions.set(sessionId, created);
  return state.sessions.get(sessionId) as Draft<SessionRecord>;
}
