/**
 * The admin service's `Status` answer, read from the folded cluster state (pure: the live facts
 * of the router process, calls in flight and waiting, come in as arguments). Lists are sorted by
 * ID, as every table of readie is, so two answers about the same state are the same bytes.
 */
import type { ClusterState, SessionRecord, WorkerRecord } from '../../projections/cluster-state.js';
import { compareText, workersById } from '../../projections/queries.js';
import type {
  LogView,
  ReservationView,
  SessionView,
  StatusResponse,
  WorkerView,
} from '../../proto/gen/readie/v1/admin.js';
import { queueTimeoutMs, queueViews } from './queue-view.js';
import type { WorkerFailureRecord } from './worker-failures.js';

/** What the router process knows beyond the state. */
export interface LiveCounts {
  readonly callsInFlight: number;
  readonly callsWaiting: number;
  /** Why each worker's last probe failed, by worker ID (the prober's words). */
  readonly probeProblems?: ReadonlyMap<string, string>;
  /** The calls that failed on each worker, as this router process saw them end. */
  readonly failures?: { of(workerId: string): WorkerFailureRecord };
  /** The live log and its archive. */
  readonly log?: LogView;
}

/** The state's vocabulary for a session: where it is in its life. */
export function sessionState(session: SessionRecord): 'pinned' | 'unpinned' | 'expired' {
  if (session.expired !== null) return 'expired';
  return session.pin === null ? 'unpinned' : 'pinned';
}

function undefinedIfNull<T>(value: T | null): T | undefined {
  return value === null ? undefined : value;
}

/** One worker as the admin service shows it. */
export function workerView(
  worker: WorkerRecord,
  probeProblem = '',
  failures: WorkerFailureRecord = { recent: [], count: 0 },
): WorkerView {
  const utilization = worker.utilization;
  const containers = [...worker.containers.values()]
    .sort((a, b) => compareText(a.containerId, b.containerId))
    .map((container) => ({
      containerId: container.containerId,
      state: container.state,
      checkpointId: container.checkpointId ?? '',
      since: container.since,
      sessionId: worker.pinnedSessions.get(container.containerId) ?? '',
    }));
  return {
    workerId: worker.workerId,
    status: worker.status,
    address: worker.address ?? '',
    flavor: worker.flavor,
    reason: worker.status === 'evicted' ? (worker.evictedReason ?? '') : (worker.error ?? ''),
    memoryTotal: undefinedIfNull(worker.memoryTotal),
    memoryUsed: utilization?.memoryUsed ?? 0,
    memoryReserved: worker.reservedMemory,
    maxContainers: undefinedIfNull(worker.maxContainers),
    cpuUsed: undefinedIfNull(utilization?.cpuUsed ?? null),
    cpuTotal: undefinedIfNull(utilization?.cpuTotal ?? null),
    gpuMemoryTotal: undefinedIfNull(worker.gpuMemoryTotal),
    gpuMemoryUsed: utilization?.gpuMemoryUsed ?? 0,
    inFlight: worker.inFlight,
    containers,
    probeFailures: worker.probeFailures,
    registeredAt: worker.registeredAt,
    lastReportAt: worker.lastHeardAt,
    lastProbeProblem: probeProblem,
    recentFailures: [...failures.recent],
    failures: failures.count,
  };
}

function sessionView(state: ClusterState, session: SessionRecord): SessionView {
  const pin = session.pin;
  const container = pin && state.workers.get(pin.workerId)?.containers.get(pin.containerId);
  return {
    sessionId: session.sessionId,
    state: sessionState(session),
    workerId: session.pin?.workerId ?? '',
    containerId: session.pin?.containerId ?? '',
    checkpointId: session.pin?.checkpointId ?? '',
    expiredReason: session.expired?.reason ?? '',
    expiredAt: session.expired?.at ?? '',
    since: container ? container.since : '',
  };
}

/** The `Status` answer for `state`. */
export function statusOf(
  state: ClusterState,
  live: LiveCounts,
  options: { readonly includeExpiredSessions: boolean },
): StatusResponse {
  const sessions = [...state.sessions.values()]
    .filter((session) => options.includeExpiredSessions || session.expired === null)
    .sort((a, b) => compareText(a.sessionId, b.sessionId))
    .map((session) => sessionView(state, session));
  const reservations: ReservationView[] = [...state.reservations.values()]
    .sort((a, b) => compareText(a.requestId, b.requestId))
    .map((reservation) => ({
      requestId: reservation.requestId,
      sessionId: reservation.sessionId ?? '',
      workerId: reservation.workerId,
      containerId: reservation.containerId ?? '',
      checkpointId: reservation.checkpointId ?? '',
      memory: reservation.memory,
      since: reservation.since,
    }));
  return {
    lastSeq: state.lastSeq,
    catalogueRevision: state.catalogue?.revision ?? '',
    routerVersion: state.routerVersion ?? '',
    routerStartedAt: state.routerStartedAt ?? '',
    workers: workersById(state).map((worker) =>
      workerView(
        worker,
        live.probeProblems?.get(worker.workerId) ?? '',
        live.failures?.of(worker.workerId),
      ),
    ),
    sessions,
    reservations,
    callsInFlight: live.callsInFlight,
    callsWaiting: live.callsWaiting,
    log: live.log,
    queue: queueViews(state),
    queueTimeoutMs: queueTimeoutMs(state),
  };
}
