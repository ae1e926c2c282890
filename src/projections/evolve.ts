/**
 * How each event changes the cluster state. `applyEvent` is the one recipe, written as an immer
 * recipe over a draft; `evolve` runs it under immer's `produce` (a new immutable state per event),
 * and long folds run it over a private working copy changed in place (see `fold.ts`).
 *
 * Consequences are folded with their causes (an eviction expires the sessions pinned to the
 * worker; a removed container expires its session; a failed call that created its session's pin
 * clears it), so a log that also holds the consequence events folds to the same state: those
 * events find the work already done and change nothing.
 *
 * Whoever keeps something derived from the workers (placement's candidate index) passes a
 * `WorkerChangeSink`: every worker the event changes, in any field, is reported to it, because the
 * only way this recipe changes a worker is through `workerToChange` and `liveWorker`, which report
 * it. Nothing here is remembered between events.
 */
import { enableMapSet, produce, type Draft } from 'immer';
import type { SessionExpiryReason } from '../events/schema.js';
import type { EventOf } from '../events/types.js';
import { assertNever, type ClusterEvent } from '../events/types.js';
import { configInForce } from '../shared/config.js';
import type { ClusterState, SessionRecord, WorkerRecord } from './cluster-state.js';
import { isLive } from './queries.js';
import { applyRoutingEvent } from './routing-fold.js';
import { restoreSnapshot } from './snapshot.js';
import { IGNORE_CHANGES, type WorkerChangeSink } from './worker-changes.js';

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
 * with: the same object, except for `Snapshot`, which replaces the whole state (and its workers
 * map, which tells a sink's owner to start over). `changes` hears of every worker it changes.
 */
export function applyEvent(
  state: State,
  event: ClusterEvent,
  changes: WorkerChangeSink = IGNORE_CHANGES,
): State {
  if (event.type !== 'Snapshot') applyRoutingEvent(state, event);
  switch (event.type) {
    case 'Snapshot':
      return restoreSnapshot(event) as unknown as State;
    case 'RouterStarted':
      state.config = configInForce(event.config);
      state.routerVersion = event.version;
      state.rulesVersion = event.rulesVersion;
      state.routerStartedAt = event.at;
      break;
    case 'CatalogueLoaded':
      state.catalogue = { revision: event.revision, catalogue: event.catalogue };
      break;
    case 'WorkerRegistered':
      registerWorker(state, event, changes);
      break;
    case 'WorkerUtilization':
      reportUtilization(state, event, changes);
      break;
    case 'WorkerLeaving': {
      const worker = liveWorker(state, event.workerId, changes);
      if (worker) {
        worker.status = 'leaving';
        worker.lastHeardAt = event.at;
      }
      break;
    }
    case 'WorkerProbeFailed': {
      const worker = liveWorker(state, event.workerId, changes);
      if (worker) worker.probeFailures = event.consecutive;
      break;
    }
    case 'WorkerEvicted':
      evictWorker(state, event, changes);
      break;
    case 'ContainerStateChanged':
      changeContainer(state, event, changes);
      break;
    case 'ContainerForgotten': {
      const worker = liveWorker(state, event.workerId, changes);
      if (worker) {
        dropContainer(state, worker, event.containerId, event, 'container_forgotten', changes);
      }
      break;
    }
    // The routing events change only the routing part (routing-fold.ts, above).
    case 'CallRequested':
    case 'CallRejected':
    case 'PinStaged':
    case 'RoutingRevised':
    case 'ResidencyChanged':
    case 'ResidencyProtected':
    case 'ResidencyBudget':
      break;
    case 'CallPlaced':
      reserve(state, event, changes);
      break;
    case 'CallBound': {
      const reservation = state.reservations.get(event.requestId);
      if (reservation) reservation.containerId = event.containerId;
      break;
    }
    case 'CallFinished':
      release(state, event.requestId, !event.ok, changes);
      break;
    case 'ReservationExpired':
      release(state, event.requestId, true, changes);
      break;
    case 'SessionPinned':
      pinSession(state, event, changes);
      break;
    case 'SessionUnpinned': {
      const session = state.sessions.get(event.sessionId);
      if (session) unpin(state, session, changes);
      break;
    }
    case 'SessionExpired':
      expireSession(state, event.sessionId, event.reason, event, changes);
      break;
    default:
      assertNever(event, 'event type');
  }
  state.lastSeq = event.seq;
  return state;
}

/** The worker's record, ready to be changed (reported to `changes`), if it exists. */
function workerToChange(
  state: State,
  workerId: string,
  changes: WorkerChangeSink,
): Worker | undefined {
  const worker = state.workers.get(workerId);
  if (worker !== undefined) changes.workerChanged(workerId);
  return worker;
}

/** A live worker, ready to be changed (events about evicted or unknown ones change nothing). */
function liveWorker(state: State, workerId: string, changes: WorkerChangeSink): Worker | undefined {
  const worker = state.workers.get(workerId);
  if (worker === undefined || !isLive(worker)) return undefined;
  changes.workerChanged(workerId);
  return worker;
}

function registerWorker(
  state: State,
  event: EventOf<'WorkerRegistered'>,
  changes: WorkerChangeSink,
): void {
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
  changes.workerChanged(event.workerId);
  if (known) {
    Object.assign(known, capacity);
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
}

function reportUtilization(
  state: State,
  event: EventOf<'WorkerUtilization'>,
  changes: WorkerChangeSink,
): void {
  const worker = liveWorker(state, event.workerId, changes);
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

function evictWorker(
  state: State,
  event: EventOf<'WorkerEvicted'>,
  changes: WorkerChangeSink,
): void {
  const worker = liveWorker(state, event.workerId, changes);
  if (!worker) return;
  for (const sessionId of [...worker.pinnedSessions.values()]) {
    expireSession(state, sessionId, 'worker_evicted', event, changes);
  }
  worker.status = 'evicted';
  worker.evictedReason = event.reason;
  worker.containers.clear();
  worker.pinnedSessions.clear();
}

function changeContainer(
  state: State,
  event: EventOf<'ContainerStateChanged'>,
  changes: WorkerChangeSink,
): void {
  const worker = liveWorker(state, event.workerId, changes);
  if (!worker) return;
  worker.lastHeardAt = event.at;
  if (event.state === 'removed') {
    dropContainer(state, worker, event.containerId, event, 'container_removed', changes);
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
  changes: WorkerChangeSink,
): void {
  worker.containers.delete(containerId);
  const sessionId = worker.pinnedSessions.get(containerId);
  if (sessionId !== undefined) expireSession(state, sessionId, reason, cause, changes);
}

function reserve(state: State, event: EventOf<'CallPlaced'>, changes: WorkerChangeSink): void {
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
  const worker = workerToChange(state, event.workerId, changes);
  if (worker) {
    worker.inFlight += 1;
    worker.reservedMemory += event.memory;
  }
}

function release(
  state: State,
  requestId: string,
  failed: boolean,
  changes: WorkerChangeSink,
): void {
  const reservation = state.reservations.get(requestId);
  if (!reservation) return;
  state.reservations.delete(requestId);
  const worker = workerToChange(state, reservation.workerId, changes);
  if (worker) {
    worker.inFlight = Math.max(0, worker.inFlight - 1);
    worker.reservedMemory = Math.max(0, worker.reservedMemory - reservation.memory);
  }
  if (!failed || reservation.sessionId === null) return;
  const session = state.sessions.get(reservation.sessionId);
  if (session && session.pinnedBy === requestId) unpin(state, session, changes);
}

function pinSession(
  state: State,
  event: EventOf<'SessionPinned'>,
  changes: WorkerChangeSink,
): void {
  const session = sessionRecord(state, event.sessionId);
  if (session.expired) return;
  const samePin =
    session.pin?.workerId === event.workerId && session.pin.containerId === event.containerId;
  if (session.pin && samePin) {
    if (event.checkpointId !== null) session.pin.checkpointId = event.checkpointId;
    return;
  }
  unpin(state, session, changes);
  session.pin = {
    workerId: event.workerId,
    containerId: event.containerId,
    checkpointId: event.checkpointId,
  };
  session.pinnedBy = event.requestId;
  const worker = workerToChange(state, event.workerId, changes);
  worker?.pinnedSessions.set(event.containerId, event.sessionId);
}

function unpin(state: State, session: Draft<SessionRecord>, changes: WorkerChangeSink): void {
  const pin = session.pin;
  if (pin) {
    const worker = state.workers.get(pin.workerId);
    if (worker && worker.pinnedSessions.get(pin.containerId) === session.sessionId) {
      workerToChange(state, pin.workerId, changes)?.pinnedSessions.delete(pin.containerId);
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
  changes: WorkerChangeSink,
): void {
  const session = sessionRecord(state, sessionId);
  if (session.expired) return;
  unpin(state, session, changes);
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
