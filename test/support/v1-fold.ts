/**
 * The fold as it was before every consequence was an event: schema v1's fold, in which a cause
 * also applied the consequences its router appended after it (an eviction expired the sessions
 * pinned to the worker, a removed, dropped or forgotten container its session, a failed call the
 * pin it created). Kept verbatim (only its imports and names changed, and the report's `standbys`
 * field copied as the fold copies it) as the reference the v1
 * upcaster (src/events/upcast.ts) is checked against: a log written before schema v2 must fold to
 * the very same state after every event (test/projections/upcast.test.ts).
 */
import { enableMapSet, produce, type Draft } from 'immer';
import type { SessionExpiryReason } from '../../src/events/schema.js';
import type { EventOf } from '../../src/events/types.js';
import { assertNever, type ClusterEvent } from '../../src/events/types.js';
import { memoryBudget } from '../../src/shared/call-budget.js';
import { configInForce } from '../../src/shared/config.js';
import type {
  ClusterState,
  ContainerRecord,
  Reservation,
  SessionRecord,
  WorkerRecord,
} from '../../src/projections/cluster-state.js';
import { isLive } from '../../src/projections/queries.js';
import {
  isStaleContainerReport,
  reconcile,
  type ContainerEntry,
} from '../../src/projections/reconcile.js';
import { forgetDue, scheduleForgetting } from '../../src/projections/forget.js';
import { applyRoutingEvent } from '../../src/projections/routing-fold.js';
import { restoreSnapshot } from '../../src/projections/snapshot.js';
import { IGNORE_CHANGES, type WorkerChangeSink } from '../../src/projections/worker-changes.js';

enableMapSet();

type State = Draft<ClusterState>;
type Worker = Draft<WorkerRecord>;

/** The state after `event` under the v1 fold, as a new immutable state (immer `produce`). */
export function evolveV1(state: ClusterState, event: ClusterEvent): ClusterState {
  return produce(state, (draft): State | undefined => {
    const next = applyEventV1(draft, event);
    return next === draft ? undefined : next;
  });
}

/**
 * Applies one event to a draft (or a private mutable state) and returns the state to continue
 * with: the same object, except for `Snapshot`, which replaces the whole state (and its workers
 * map, which tells a sink's owner to start over). `changes` hears of every worker it changes.
 */
export function applyEventV1(
  state: State,
  event: ClusterEvent,
  changes: WorkerChangeSink = IGNORE_CHANGES,
): State {
  if (event.type !== 'Snapshot') {
    forgetDue(state, event);
    applyRoutingEvent(state, event);
  }
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
    case 'WorkerProbeSucceeded': {
      const worker = liveWorker(state, event.workerId, changes);
      if (worker) worker.probeFailures = 0;
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
    case 'CallRequested':
      state.pendingCalls.set(event.requestId, {
        requestId: event.requestId,
        sessionId: event.sessionId === '' ? null : event.sessionId,
        tenantId: event.tenantId,
        memory: memoryBudget(event.demand.memory, state.config.DEFAULT_MEMORY),
        unreachable: [],
      });
      break;
    case 'CallRejected':
      state.pendingCalls.delete(event.requestId);
      break;
    // The routing events change only the routing part (routing-fold.ts, above).
    case 'PinStaged':
    case 'RoutingRevised':
    case 'ResidencyChanged':
    case 'ResidencyProtected':
    case 'ResidencyBudget':
    case 'ImageBuilt':
    case 'ImageBuildFailed':
    case 'ImageRemoved':
      break;
    // The log's own bookkeeping (retention) changes no state.
    case 'LogSegmentArchived':
    case 'LogArchiveExpired':
      break;
    case 'CallPlaced':
      reserve(state, event, changes);
      break;
    case 'CallDialFailed':
      releaseAttempt(state, event, changes);
      break;
    case 'CallBound':
      bind(state, event, changes);
      break;
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
    case 'SessionEnded':
      // Its container is the worker's to destroy; the record stays until it reports it removed.
      expireSession(state, event.sessionId, 'ended', event, changes);
      break;
    case 'CallQueued':
    case 'CallAdmitted':
    case 'CallLeftQueue':
    case 'QuotaChanged':
    case 'QuotaRemoved':
      // Never in a v1 log (the queue and quotas came with schema v2).
      break;
    case 'SessionTurnRefused':
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
  changes.workerChanged(event.workerId);
  const instanceId = event.instanceId ?? known?.instanceId ?? null;
  const restarted =
    known !== undefined &&
    event.instanceId !== null &&
    known.instanceId !== null &&
    known.instanceId !== event.instanceId;
  // A new process of the worker: the old one's containers and sessions end as in an eviction.
  if (known && restarted && isLive(known)) endContainers(state, known, event, changes);
  // Only a probe proves the router reaches the worker; a registration resets the count only for
  // another process or another address.
  const moved = !known || restarted || known.address !== event.address;
  const capacity = {
    address: event.address,
    status: event.status,
    error: event.error,
    flavor: event.flavor,
    memoryTotal: event.memoryTotal,
    maxContainers: event.maxContainers,
    gpuMemoryTotal: event.gpuMemoryTotal,
    instanceId,
    probeFailures: moved ? 0 : known.probeFailures,
    lastHeardAt: event.at,
    evictedReason: null,
  };
  let worker: Worker;
  if (known) {
    Object.assign(known, capacity);
    if (restarted) {
      known.containers.clear();
      known.pinnedSessions.clear();
      known.reportedSlots = null;
      known.lastFullReportSeq = null;
    }
    worker = known;
  } else {
    state.workers.set(event.workerId, {
      workerId: event.workerId,
      ...capacity,
      utilization: null,
      reservedMemory: 0,
      inFlight: 0,
      registeredAt: event.at,
      containers: new Map(),
      pinnedSessions: new Map(),
      callContainers: new Map(),
      sessionContainers: new Map(),
      idleContainers: 0,
      reportedSlots: null,
      lastFullReportSeq: null,
    });
    worker = state.workers.get(event.workerId) as Worker;
  }
  if (event.containers !== null) {
    applyFullReport(state, worker, event.containers, event.reportSeq, event, changes);
  }
  recount(worker);
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
    // A field added to the report since (not a consequence): a v1 log reads it as null.
    standbys: event.standbys,
  };
  worker.lastHeardAt = event.at;
  if (event.containers === null) {
    // A count alone: the floor of what the container-count filter counts until the next report.
    worker.reportedSlots = event.containerCount;
    return;
  }
  applyFullReport(state, worker, event.containers, event.reportSeq, event, changes);
  recount(worker);
}

/**
 * A full report: records it no longer lists are dropped (their sessions expire), those it lists
 * added or updated, unless the router heard of them after it was taken (`reconcile.ts`).
 */
function applyFullReport(
  state: State,
  worker: Worker,
  entries: readonly ContainerEntry[],
  reportSeq: number | null,
  cause: ClusterEvent,
  changes: WorkerChangeSink,
): void {
  const { stale, dropped, kept } = reconcile(worker, entries, reportSeq);
  if (stale) return;
  for (const containerId of dropped) {
    dropContainer(state, worker, containerId, cause, 'container_removed', changes);
  }
  for (const entry of kept) {
    setContainer(worker, entry.containerId, entry.state, entry.checkpointId, reportSeq, cause.at);
  }
  worker.reportedSlots = null;
  if (reportSeq !== null) worker.lastFullReportSeq = reportSeq;
}

/** Adds a container record or updates it (`since` moves only when the state changes). */
function setContainer(
  worker: Worker,
  containerId: string,
  state: ContainerRecord['state'],
  checkpointId: string | null,
  reportSeq: number | null,
  at: string,
): void {
  const known = worker.containers.get(containerId);
  if (known) {
    if (known.state !== state) known.since = at;
    known.state = state;
    known.checkpointId = checkpointId;
    if (reportSeq !== null) known.reportSeq = reportSeq;
    return;
  }
  worker.containers.set(containerId, { containerId, state, checkpointId, since: at, reportSeq });
}

/**
 * Counts the container records that hold a slot with no call in flight in them: idle ones, and
 * those kept for a pinned session. A record whose call ended and that no session keeps is one
 * its worker is destroying (or one a dead router never heard the end of): it holds nothing.
 */
function recount(worker: Worker): void {
  let idle = 0;
  for (const record of worker.containers.values()) {
    if (worker.callContainers.has(record.containerId)) continue;
    if (record.state === 'ready' || worker.pinnedSessions.has(record.containerId)) idle += 1;
  }
  worker.idleContainers = idle;
}

/** Moves the worker's reported slot count (when it has one) by `delta`, never below 0. */
function moveReportedSlots(worker: Worker, delta: number): void {
  if (worker.reportedSlots === null) return;
  worker.reportedSlots = Math.max(0, worker.reportedSlots + delta);
}

function evictWorker(
  state: State,
  event: EventOf<'WorkerEvicted'>,
  changes: WorkerChangeSink,
): void {
  const worker = liveWorker(state, event.workerId, changes);
  if (!worker) return;
  endContainers(state, worker, event, changes);
  worker.status = 'evicted';
  worker.evictedReason = event.reason;
}

/** The worker's containers are gone: every session pinned there expires, every record goes. */
function endContainers(
  state: State,
  worker: Worker,
  cause: ClusterEvent,
  changes: WorkerChangeSink,
): void {
  changes.workerChanged(worker.workerId);
  for (const sessionId of [...worker.pinnedSessions.values()]) {
    expireSession(state, sessionId, 'worker_evicted', cause, changes);
  }
  worker.containers.clear();
  worker.pinnedSessions.clear();
  worker.reportedSlots = null;
  recount(worker);
}

function changeContainer(
  state: State,
  event: EventOf<'ContainerStateChanged'>,
  changes: WorkerChangeSink,
): void {
  const worker = liveWorker(state, event.workerId, changes);
  if (!worker) return;
  worker.lastHeardAt = event.at;
  if (isStaleContainerReport(worker, event.containerId, event.reportSeq)) return;
  if (event.state === 'removed') {
    dropContainer(state, worker, event.containerId, event, 'container_removed', changes);
    return;
  }
  setContainer(
    worker,
    event.containerId,
    event.state,
    event.checkpointId,
    event.reportSeq,
    event.at,
  );
  recount(worker);
}

function dropContainer(
  state: State,
  worker: Worker,
  containerId: string,
  cause: ClusterEvent,
  reason: SessionExpiryReason,
  changes: WorkerChangeSink,
): void {
  const record = worker.containers.get(containerId);
  if (record && record.state === 'ready' && !worker.callContainers.has(containerId)) {
    moveReportedSlots(worker, -1);
  }
  worker.containers.delete(containerId);
  const sessionId = worker.pinnedSessions.get(containerId);
  if (sessionId !== undefined) expireSession(state, sessionId, reason, cause, changes);
  recount(worker);
}

function reserve(state: State, event: EventOf<'CallPlaced'>, changes: WorkerChangeSink): void {
  if (state.reservations.has(event.requestId)) return;
  const pending = state.pendingCalls.get(event.requestId);
  // A log in the documented vocabulary records no `memory` nor session: the call's, as requested.
  const memory = event.memory ?? pending?.memory ?? state.config.DEFAULT_MEMORY;
  state.pendingCalls.delete(event.requestId);
  const sessionId = event.sessionId ?? pending?.sessionId ?? null;
  const tenantId = pending?.tenantId ?? null;
  // The session's first placed call makes its record: the session is that call's tenant's.
  if (sessionId !== null) sessionRecord(state, sessionId, tenantId);
  state.reservations.set(event.requestId, {
    requestId: event.requestId,
    sessionId,
    tenantId,
    workerId: event.workerId,
    containerId: event.containerId,
    checkpointId: event.checkpointId,
    memory,
    since: event.at,
    unreachable: [...(pending?.unreachable ?? [])],
  });
  const worker = workerToChange(state, event.workerId, changes);
  if (worker) {
    worker.inFlight += 1;
    worker.reservedMemory += memory;
    if (event.containerId === null) moveReportedSlots(worker, 1);
    else bindCall(worker, event.containerId, event.requestId);
    recount(worker);
  }
}

/** The worker's first answer names the container the call runs in. */
function bind(state: State, event: EventOf<'CallBound'>, changes: WorkerChangeSink): void {
  const reservation = state.reservations.get(event.requestId);
  if (!reservation) return;
  const worker = workerToChange(state, reservation.workerId, changes);
  if (worker) {
    unbindCall(worker, reservation.containerId, reservation.requestId);
    bindCall(worker, event.containerId, event.requestId);
  }
  reservation.containerId = event.containerId;
  if (worker) recount(worker);
}

/** Notes that call `requestId` runs in `containerId` (beside any other: see `callContainers`). */
function bindCall(worker: Worker, containerId: string, requestId: string): void {
  const calls = worker.callContainers.get(containerId);
  if (calls === undefined) worker.callContainers.set(containerId, [requestId]);
  else if (!calls.includes(requestId)) {
    worker.callContainers.set(containerId, [...calls, requestId].sort());
  }
}

/** Forgets that call `requestId` runs in `containerId`, if it does. */
function unbindCall(worker: Worker, containerId: string | null, requestId: string): void {
  if (containerId === null) return;
  const calls = worker.callContainers.get(containerId);
  if (!calls?.includes(requestId)) return;
  if (calls.length === 1) worker.callContainers.delete(containerId);
  else
    worker.callContainers.set(
      containerId,
      calls.filter((id) => id !== requestId),
    );
}

/** Takes the reservation away and gives its worker the memory and the call slot back. */
function takeReservation(
  state: State,
  requestId: string,
  changes: WorkerChangeSink,
): { reservation: Draft<Reservation>; worker: Worker | undefined } | undefined {
  const reservation = state.reservations.get(requestId);
  if (!reservation) return undefined;
  state.reservations.delete(requestId);
  const worker = workerToChange(state, reservation.workerId, changes);
  if (worker) {
    worker.inFlight = Math.max(0, worker.inFlight - 1);
    worker.reservedMemory = Math.max(0, worker.reservedMemory - reservation.memory);
    unbindCall(worker, reservation.containerId, requestId);
  }
  return { reservation, worker };
}

/**
 * A dial failed: the attempt's reservation is released and the call waits for its next placement,
 * which leaves out every worker it could not reach; a new container that was never made gives its
 * slot back.
 */
function releaseAttempt(
  state: State,
  event: EventOf<'CallDialFailed'>,
  changes: WorkerChangeSink,
): void {
  const taken = takeReservation(state, event.requestId, changes);
  if (!taken) return;
  const { reservation, worker } = taken;
  state.pendingCalls.set(event.requestId, {
    requestId: event.requestId,
    sessionId: reservation.sessionId,
    tenantId: reservation.tenantId,
    memory: reservation.memory,
    unreachable: [...reservation.unreachable, event.workerId],
  });
  if (worker) {
    if (reservation.containerId === null) moveReportedSlots(worker, -1);
    recount(worker);
  }
}

function release(
  state: State,
  requestId: string,
  failed: boolean,
  changes: WorkerChangeSink,
): void {
  const taken = takeReservation(state, requestId, changes);
  if (!taken) return;
  const { reservation, worker } = taken;
  const session =
    reservation.sessionId === null ? undefined : state.sessions.get(reservation.sessionId);
  if (worker) {
    // The worker keeps a call's container only for its session after a call that succeeded.
    const kept =
      !failed &&
      session?.pin !== null &&
      session?.pin !== undefined &&
      session.pin.workerId === reservation.workerId &&
      session.pin.containerId === reservation.containerId;
    if (!kept) moveReportedSlots(worker, -1);
    recount(worker);
  }
  if (!failed || !session) return;
  if (session.pinnedBy === requestId) unpin(state, session, changes);
}

function pinSession(
  state: State,
  event: EventOf<'SessionPinned'>,
  changes: WorkerChangeSink,
): void {
  const session = sessionRecord(state, event.sessionId, pinningTenant(state, event));
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
  // A log in the documented vocabulary names no request: the call running in the container made it.
  session.pinnedBy =
    event.requestId ??
    state.workers.get(event.workerId)?.callContainers.get(event.containerId)?.[0] ??
    null;
  const worker = workerToChange(state, event.workerId, changes);
  if (worker) {
    worker.pinnedSessions.set(event.containerId, event.sessionId);
    recount(worker);
  }
}

function unpin(state: State, session: Draft<SessionRecord>, changes: WorkerChangeSink): void {
  const pin = session.pin;
  if (pin) {
    const worker = state.workers.get(pin.workerId);
    if (worker && worker.pinnedSessions.get(pin.containerId) === session.sessionId) {
      changes.workerChanged(pin.workerId);
      worker.pinnedSessions.delete(pin.containerId);
      recount(worker);
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
  scheduleForgetting(state, sessionId, cause.at);
}

/**
 * The tenant of the call a `SessionPinned` names (or of the call running in its container), for a
 * pin whose session has no record yet: a log that never placed the call for its session.
 */
function pinningTenant(state: State, event: EventOf<'SessionPinned'>): string | null {
  const requestId =
    event.requestId ??
    state.workers.get(event.workerId)?.callContainers.get(event.containerId)?.[0] ??
    null;
  return requestId === null ? null : (state.reservations.get(requestId)?.tenantId ?? null);
}

/**
 * The session's record, created (unpinned, not expired, owned by `tenantId`) if the log never
 * mentioned it; a known record keeps its owner.
 */
function sessionRecord(
  state: State,
  sessionId: string,
  tenantId: string | null = null,
): Draft<SessionRecord> {
  const known = state.sessions.get(sessionId);
  if (known) return known;
  const created: SessionRecord = { sessionId, tenantId, pin: null, pinnedBy: null, expired: null };
  state.sessions.set(sessionId, created);
  return state.sessions.get(sessionId) as Draft<SessionRecord>;
}
