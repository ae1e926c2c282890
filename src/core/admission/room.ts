/**
 * When admission is worth deciding again (docs/placement.md, "The admission queue"): after an
 * event that can let a queued call fit where it did not, or be refused outright where it waited
 * (a call ending, a container removed, a worker registering, leaving or evicted, a session
 * ending, a pin or catalogue change, a call leaving the queue), and after a load report only when
 * it makes room on its worker (less memory or GPU memory in use, fewer container slots counted).
 * A report that makes no room changes no answer placement gives, so admission is not asked.
 */
import type { EventType } from '../../events/schema.js';
import type { ContainerEntry } from '../../projections/reconcile.js';
import { reconcile, sessionContainersAfter } from '../../projections/reconcile.js';
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { idleSlots, isPlaceable, slotsCounted } from '../../projections/queries.js';
import type { Decision } from '../decision.js';

/** Events after which a queued call may fit, or be refused outright, where it did not. */
const OPENS: ReadonlySet<EventType> = new Set<EventType>([
  'CallFinished',
  'ReservationExpired',
  'CallLeftQueue',
  'CallDialFailed',
  'ContainerForgotten',
  'WorkerRegistered',
  'WorkerEvicted',
  'WorkerLeaving',
  'WorkerProbeSucceeded',
  'SessionExpired',
  'SessionEnded',
  'SessionUnpinned',
  'RoutingRevised',
  'QuotaChanged',
  'QuotaRemoved',
  'CatalogueLoaded',
  'RouterStarted',
]);

/** A decision that may carry whether its load report makes room (`reportOpensRoom`). */
export interface RoomDecision extends Decision {
  /** For a load report: whether it makes room on its worker (absent: not a load report). */
  readonly opensRoom?: boolean;
}

/**
 * Whether admission may admit after `decision` where it admitted nothing before: one of its
 * events can open room (a container report opens room unless it reports a container `ready`,
 * which only adds an idle one; a load report only when it makes room on its worker).
 */
export function mayAdmitAfter(decision: Pick<RoomDecision, 'events' | 'opensRoom'>): boolean {
  for (const event of decision.events) {
    if (event.type === 'WorkerUtilization') {
      if (decision.opensRoom !== false) return true;
    } else if (event.type === 'ContainerStateChanged') {
      if (event.state !== 'ready') return true;
    } else if (OPENS.has(event.type)) return true;
  }
  return false;
}

/** What of a load report can make room. */
export interface RoomReport {
  readonly memoryUsed: number;
  readonly gpuMemoryUsed: number | null;
  readonly containerCount: number;
  readonly containers: readonly ContainerEntry[] | null;
  readonly reportSeq: number | null;
}

/**
 * Whether the load report `report` makes room on `worker` (its record before the report): less
 * memory or GPU memory in use than its last report said, or fewer container slots counted once
 * the report is folded (the container-count filter's count). A worker that is not placeable gains
 * no room from a load report (it changes no status).
 */
export function reportOpensRoom(worker: WorkerRecord | undefined, report: RoomReport): boolean {
  if (worker === undefined || !isPlaceable(worker)) return false;
  const before = worker.utilization;
  if (before === null) return true;
  if (report.memoryUsed < before.memoryUsed) return true;
  if ((report.gpuMemoryUsed ?? 0) < (before.gpuMemoryUsed ?? 0)) return true;
  return slotsAfter(worker, report) < slotsCounted(worker);
}

/** The container slots the container-count filter counts once `report` is folded (`evolve.ts`). */
function slotsAfter(worker: WorkerRecord, report: RoomReport): number {
  if (report.containers === null) {
    return slotsCounted({ ...worker, reportedSlots: report.containerCount });
  }
  const { stale, dropped, kept } = reconcile(worker, report.containers, report.reportSeq);
  if (stale) return slotsCounted(worker);
  const states = new Map<string, { state: string }>(worker.containers);
  for (const containerId of dropped) states.delete(containerId);
  for (const entry of kept) states.set(entry.containerId, entry);
  const sessionContainers = sessionContainersAfter(worker, report.containers, dropped);
  const idle = idleSlots({ ...worker, sessionContainers }, states);
  return slotsCounted({ inFlight: worker.inFlight, idleContainers: idle, reportedSlots: null });
}
