/**
 * How each event changes the cluster state. `applyEvent` is the one recipe, written as an immer
 * recipe over a draft; `evolve` runs it under immer's `produce` (a new immutable state per event),
 * and long folds run it over a private working copy changed in place (see `fold.ts`).
 *
 * The fold applies events only: a consequence (a session expired by its worker's eviction or its
 * container's removal, a pin cleared by the failed call that created it) is an event of its own,
 * decided by the core (`src/core/consequences`). An event of a v1 log (`upcast.ts`) is read as
 * itself and the consequences a v1 fold applied with it.
 *
 * Whoever keeps something derived from the workers (placement's candidate index) passes a
 * `WorkerChangeSink`: every worker the event changes, in any field, is reported to it, because the
 * only way this recipe changes a worker is through `workerToChange` and `liveWorker`, which report
 * it. Nothing here is remembered between events. Before each event, what no rule needs any more
 * as of its time is forgotten (`forget.ts`).
 */
import { enableMapSet, produce, type Draft } from 'immer';
import type { SessionExpiryReason } from '../events/schema.js';
import type { EventOf, NewEvent } from '../events/types.js';
import { assertNever, type ClusterEvent } from '../events/types.js';
import { CONSEQUENCES_LOGGED, schemaVersionOf, v1Consequences } from '../events/upcast.js';
import { memoryBudget } from '../shared/call-budget.js';
import { configInForce } from '../shared/config.js';
import type {
  ClusterState,
  ContainerRecord,
  Reservation,
  SessionRecord,
  WorkerRecord,
} from './cluster-state.js';
import {
  changeSession,
  indexQueued,
  indexReservation,
  queueTenant,
  unindexQueued,
} from './admission-index.js';
import { idleSlots, isLive } from './queries.js';
import {
  isStaleContainerReport,
  reconcile,
  sessionContainersAfter,
  type ContainerEntry,
} from './reconcile.js';
import { forgetDue, scheduleForgetting } from './forget.js';
import { applyImageEvent } from './image-holdings.js';
import { applyQuotaEvent } from './quota-state.js';
import { applyRoutingEvent } from './routing-fold.js';
import { rulesSteps } from './rules-steps.js';
import { restoreSnapshot } from './snapshot.js';
import { V1_READING } from './v1-reading.js';
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
  if (event.type === 'Snapshot') return restoreSnapshot(event) as unknown as State;
  forgetDue(state, event);
  applyRoutingEvent(state, event);
  if (state.schemaVersion >= CONSEQUENCES_LOGGED) {
    applyToCluster(state, event, changes);
  } else {
    // A v1 event: itself, then the consequences a v1 fold applied with it, decided on the state
    // the event met and stamped with its envelope. A v1 fold applied those to the cluster
    // state alone (the routing part heard of an expiry only from a logged `SessionExpired`).
    const implied = v1Consequences<ClusterState>(event, state, V1_READING);
    applyToCluster(state, event, changes);
    for (const consequence of implied) {
      applyToCluster(state, stampedLike(consequence, event), changes);
    }
  }
  state.lastSeq = event.seq;
  return state;
}

/** A consequence `upcast.ts` read into a v1 event, with that event's envelope. */
function stampedLike(consequence: NewEvent, cause: ClusterEvent): ClusterEvent {
  return { seq: cause.seq, at: cause.at, cause: cause.cause, ...consequence };
}

/** What `event` changes outside the routing part (`routing-fold.ts`). */
function applyToCluster(state: State, event: ClusterEvent, changes: WorkerChangeSink): void {
  switch (event.type) {
    case 'Snapshot':
      // Replaces the whole state: `applyEvent` restores it.
      break;
    case 'RouterStarted':
      state.config = configInForce(event.config);
      state.routerVersion = event.version;
      state.rulesVersion = event.rulesVersion;
      state.routerStartedAt = event.at;
      state.schemaVersion = schemaVersionOf(event);
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
        dropContainer(worker, event.containerId);
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
        ...(event.deadlineMs === null ? {} : { deadlineMs: event.deadlineMs }),
        ...(event.imageKey === null || event.imageKey === undefined
          ? {}
          : { imageKey: event.imageKey }),
      });
      break;
    case 'CallRejected':
      state.pendingCalls.delete(event.requestId);
      break;
    case 'CallQueued':
      enqueue(state, event);
      break;
    case 'CallAdmitted':
      // Still pending: its `CallPlaced` follows in the same append.
      unindexQueued(state, state.queue.get(event.requestId));
      state.queue.delete(event.requestId);
      break;
    case 'CallLeftQueue':
      unindexQueued(state, state.queue.get(event.requestId));
      state.queue.delete(event.requestId);
      state.pendingCalls.delete(event.requestId);
      break;
    // The routing events change only the routing part (routing-fold.ts, above).
    case 'PinStaged':
    case 'RoutingRevised':
    case 'ResidencyChanged':
    case 'ResidencyProtected':
    case 'ResidencyBudget':
      break;
    // The images each worker holds (image-holdings.ts): placement rules v8 read them.
    case 'ImageBuilt':
    case 'ImageRemoved':
      applyImageEvent(state.images, state.imageKeys, event);
      break;
    case 'ImageBuildFailed':
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
      // It ended with the event that caused it (its eviction, its container's removal).
      expireSession(
        state,
        event.sessionId,
        event.reason,
        event.at,
        event.causeSeq ?? event.seq,
        changes,
      );
      break;
    case 'SessionEnded':
      // Its container is the worker's to destroy; the record stays until it reports it removed.
      expireSession(state, event.sessionId, 'ended', event.at, event.seq, changes);
      break;
    case 'SessionTurnRefused':
      // A call refused before it reached placement ("session is busy"): nothing was reserved.
      break;
    case 'QuotaChanged':
    case 'QuotaRemoved':
      applyQuotaEvent(state.quotas, event);
      break;
    // Where the log keeps its old segments is no part of the cluster's state.
    case 'LogSegmentArchived':
    case 'LogArchiveExpired':
      break;
    default:
      assertNever(event, 'event type');
  }
}

/**
 * What a queued call keeps beyond its event (set only when there is something to keep): a pinned
 * call's table revision in force as it queues, and its caller's deadline and image key as
 * requested (from the `CallRequested` before it).
 */
function queuedExtras(
  state: State,
  event: EventOf<'CallQueued'>,
): { revision?: number; deadlineMs?: number; imageKey?: string } {
  const entry =
    event.demand.pinned === true && event.tenantId !== null
      ? state.routing.entries.get(event.tenantId)
      : undefined;
  const pending = state.pendingCalls.get(event.requestId);
  const deadlineMs = pending?.deadlineMs ?? null;
  const imageKey = pending?.imageKey;
  return {
    ...(entry === undefined ? {} : { revision: entry.revision }),
    ...(deadlineMs === null ? {} : { deadlineMs }),
    ...(imageKey === undefined ? {} : { imageKey }),
  };
}

/**
 * A call joins the admission queue (at the back of its tenant's; one queued again keeps its place,
 * as the queue's map keeps its key's).
 */
function enqueue(state: State, event: EventOf<'CallQueued'>): void {
  const known = state.queue.get(event.requestId);
  const call = {
    requestId: event.requestId,
    sessionId: event.sessionId === '' ? null : event.sessionId,
    tenantId: event.tenantId,
    demand: event.demand,
    retryOf: event.retryOf,
    seq: event.seq,
    at: event.at,
    ...queuedExtras(state, event),
  };
  const sameTenant =
    known !== undefined && queueTenant(known.tenantId) === queueTenant(call.tenantId);
  if (known !== undefined && !sameTenant) unindexQueued(state, known);
  state.queue.set(event.requestId, call);
  if (!sameTenant) indexQueued(state, call);
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
  // A new process of the worker: the old one's containers end as in an eviction.
  if (known && restarted && isLive(known)) endContainers(known, changes);
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
      known.sessionContainers.clear();
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
    applyFullReport(worker, event.containers, event.reportSeq, event);
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
    standbys: event.standbys,
  };
  worker.lastHeardAt = event.at;
  if (event.containers === null) {
    // A count alone: the floor of what the container-count filter counts until the next report.
    worker.reportedSlots = event.containerCount;
    return;
  }
  applyFullReport(worker, event.containers, event.reportSeq, event);
  recount(worker);
}

/**
 * A full report: records it no longer lists are dropped (their sessions expire by the
 * `SessionExpired` after it), those it lists added or updated, unless the router heard of them
 * after it was taken (`reconcile.ts`).
 */
function applyFullReport(
  worker: Worker,
  entries: readonly ContainerEntry[],
  reportSeq: number | null,
  cause: ClusterEvent,
): void {
  const { stale, dropped, kept } = reconcile(worker, entries, reportSeq);
  if (stale) return;
  const sessionContainers =
    worker.sessionContainers.size === 0 ? null : sessionContainersAfter(worker, entries, dropped);
  for (const containerId of dropped) {
    dropContainer(worker, containerId);
  }
  if (sessionContainers !== null) worker.sessionContainers = sessionContainers;
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

/** Counts the containers that hold a slot with no call in flight in them. */
function recount(worker: Worker): void {
  worker.idleContainers = idleSlots(worker, worker.containers);
}

/**
 * Rules 7 on: the container `containerId` was made or used for `sessionId`'s call, so it holds a
 * slot until its worker reports it gone (`WorkerRecord.sessionContainers`).
 */
function noteSessionContainer(
  state: State,
  worker: Worker,
  containerId: string,
  sessionId: string,
): void {
  if (!isLive(worker) || !rulesSteps(state.rulesVersion).sessionContainersHoldSlots) return;
  const known = worker.sessionContainers.get(containerId);
  if (known?.sessionId === sessionId && !known.unlisted) return;
  worker.sessionContainers.set(containerId, { sessionId, unlisted: false });
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
  endContainers(worker, changes);
  worker.status = 'evicted';
  worker.evictedReason = event.reason;
}

/**
 * The worker's containers are gone, every record with them (the sessions pinned there expire by
 * their own `SessionExpired`, which follows).
 */
function endContainers(worker: Worker, changes: WorkerChangeSink): void {
  changes.workerChanged(worker.workerId);
  worker.containers.clear();
  worker.pinnedSessions.clear();
  worker.sessionContainers.clear();
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
  if (event.state === 'removed' || event.state === 'error') {
    // Gone (or dying, its slot already free on the worker), however late the report.
    if (worker.sessionContainers.delete(event.containerId)) recount(worker);
  }
  if (isStaleContainerReport(worker, event.containerId, event.reportSeq)) return;
  if (event.state === 'removed') {
    dropContainer(worker, event.containerId);
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

/**
 * A container is gone (removed, dropped by a full report, forgotten): its record goes. A session
 * pinned there expires by the `SessionExpired` after it.
 */
function dropContainer(worker: Worker, containerId: string): void {
  const record = worker.containers.get(containerId);
  if (record && record.state === 'ready' && !worker.callContainers.has(containerId)) {
    moveReportedSlots(worker, -1);
  }
  worker.containers.delete(containerId);
  worker.sessionContainers.delete(containerId);
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
  indexReservation(state, { tenantId, sessionId }, 1);
  const worker = workerToChange(state, event.workerId, changes);
  if (worker) {
    worker.inFlight += 1;
    worker.reservedMemory += memory;
    if (event.containerId === null) moveReportedSlots(worker, 1);
    else {
      bindCall(worker, event.containerId, event.requestId);
      if (sessionId !== null) noteSessionContainer(state, worker, event.containerId, sessionId);
    }
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
    if (reservation.sessionId !== null) {
      noteSessionContainer(state, worker, event.containerId, reservation.sessionId);
    }
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
  indexReservation(state, reservation, -1);
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
  // A failed call that created its session's pin: the pin goes by the `SessionUnpinned` after it.
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
  changeSession(state, session, () => {
    session.pin = {
      workerId: event.workerId,
      containerId: event.containerId,
      checkpointId: event.checkpointId,
    };
  });
  // A log in the documented vocabulary names no request: the call running in the container made it.
  session.pinnedBy =
    event.requestId ??
    state.workers.get(event.workerId)?.callContainers.get(event.containerId)?.[0] ??
    null;
  const worker = workerToChange(state, event.workerId, changes);
  if (worker) {
    worker.pinnedSessions.set(event.containerId, event.sessionId);
    noteSessionContainer(state, worker, event.containerId, event.sessionId);
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
  changeSession(state, session, () => {
    session.pin = null;
  });
  session.pinnedBy = null;
}

/** The session ended at `at`, by the event at `seq` (the first reason stays). */
function expireSession(
  state: State,
  sessionId: string,
  reason: SessionExpiryReason,
  at: string,
  seq: number,
  changes: WorkerChangeSink,
): void {
  const session = sessionRecord(state, sessionId);
  if (session.expired) return;
  unpin(state, session, changes);
  changeSession(state, session, () => {
    session.expired = { reason, at, seq };
  });
  scheduleForgetting(state, sessionId, at);
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
