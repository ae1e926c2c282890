/**
 * Read-only questions placement, the reaper and replay ask of the state. They read in place and
 * allocate nothing on the hot paths (placement asks them of every worker for every call).
 */
import type { ClusterState, WorkerRecord } from './cluster-state.js';

/** Memory in use (last report) plus memory reserved for calls in flight, in bytes. */
export function memoryCommitted(
  worker: Pick<WorkerRecord, 'utilization' | 'reservedMemory'>,
): number {
  return (worker.utilization?.memoryUsed ?? 0) + worker.reservedMemory;
}

/** GPU memory in use (last report), in bytes. */
export function gpuMemoryInUse(worker: Pick<WorkerRecord, 'utilization'>): number {
  return worker.utilization?.gpuMemoryUsed ?? 0;
}

/** Containers the worker holds (reported and not removed or forgotten). */
export function heldContainers(worker: WorkerRecord): number {
  return worker.containers.size;
}

/**
 * Container slots the router sees taken on the worker: each call in flight once (in its own
 * container or one it reuses, reported or not yet), plus each container holding a slot with no
 * call in it (idle, or kept for a pinned session). Containers whose call ended and that no
 * session keeps are being destroyed and hold none.
 */
export function slotsSeen(worker: Pick<WorkerRecord, 'inFlight' | 'idleContainers'>): number {
  return worker.inFlight + worker.idleContainers;
}

/**
 * Whether the container `containerId`, in `state`, holds a slot with no call in flight in it:
 * idle (`ready`), kept for a pinned session, or a session's container its worker has not reported
 * gone (`busy` after its call ended: the worker keeps it, or destroys it and says so). A record
 * whose call ended and that no session keeps or made is one its worker is destroying (or one a
 * dead router never heard the end of): it holds nothing. One rule the fold's count
 * (`idleContainers`), a snapshot's and admission's look-ahead share (`idleSlots`).
 */
export function holdsIdleSlot(
  worker: Pick<WorkerRecord, 'callContainers' | 'pinnedSessions' | 'sessionContainers'>,
  containerId: string,
  state: string,
): boolean {
  if (worker.callContainers.has(containerId)) return false;
  if (state === 'ready' || worker.pinnedSessions.has(containerId)) return true;
  return state === 'busy' && worker.sessionContainers.has(containerId);
}

/**
 * The slots held with no call in flight in them, given the worker's container records' states
 * (`states`, by container ID): the records that hold one (`holdsIdleSlot`), and each session
 * container the worker has not reported at all (no record yet) with no call in it.
 */
export function idleSlots(
  worker: Pick<WorkerRecord, 'callContainers' | 'pinnedSessions' | 'sessionContainers'>,
  states: ReadonlyMap<string, { readonly state: string }>,
): number {
  let idle = 0;
  for (const [containerId, { state }] of states) {
    if (holdsIdleSlot(worker, containerId, state)) idle += 1;
  }
  for (const containerId of worker.sessionContainers.keys()) {
    if (!states.has(containerId) && !worker.callContainers.has(containerId)) idle += 1;
  }
  return idle;
}

/**
 * Container slots the container-count filter counts: what the router sees, never less than what
 * the worker's own last count (a report that listed no containers) comes to with what the router
 * learned since.
 */
export function slotsCounted(
  worker: Pick<WorkerRecord, 'inFlight' | 'idleContainers' | 'reportedSlots'>,
): number {
  const seen = slotsSeen(worker);
  const reported = worker.reportedSlots ?? 0;
  return seen > reported ? seen : reported;
}

/**
 * Whether the worker is live: the router has not evicted it. The one definition: events about
 * a worker that is not live change nothing, and only live workers are probed, reaped or dialed.
 */
export function isLive(worker: Pick<WorkerRecord, 'status'>): boolean {
  return worker.status !== 'evicted';
}

/** Whether the worker has an address to reach it at. */
export function hasAddress<W extends Pick<WorkerRecord, 'address'>>(
  worker: W,
): worker is W & { readonly address: string } {
  return worker.address !== null && worker.address !== '';
}

/** Whether the worker may receive new calls: last status ready, and an address to reach it. */
export function isPlaceable(worker: Pick<WorkerRecord, 'status' | 'address'>): boolean {
  return worker.status === 'ready' && hasAddress(worker);
}

/** Workers sorted by ID as text (the order explanations and tables list them in). */
export function workersById(state: ClusterState): WorkerRecord[] {
  return [...state.workers.values()].sort((a, b) => compareText(a.workerId, b.workerId));
}

/** Compares two strings as text (UTF-16 code units), the order every tie-break uses. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
