/**
 * Which worker process a report comes from. A worker's credential names its worker ID; each start
 * of a worker process also draws a new instance ID, which every report carries, so two processes
 * with one ID (a restart, or a second worker started by mistake) are told apart (docs/router.md,
 * "Worker identity").
 */
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import { liveWorkerOf } from '../consequences/index.js';

/** How a report's instance compares with the one registered under its worker ID. */
export type InstanceMatch =
  /** No live worker holds the ID. */
  | { readonly kind: 'unknown' }
  /** The registered instance (or a report or registration that names none). */
  | { readonly kind: 'same'; readonly worker: WorkerRecord }
  /** Another live instance holds the ID. */
  | { readonly kind: 'other'; readonly holder: WorkerRecord };

/** Compares the instance a report names with the live worker of its ID. */
export function instanceMatch(
  state: ClusterState,
  workerId: string,
  instanceId: string | null,
): InstanceMatch {
  const worker = liveWorkerOf(state, workerId);
  if (!worker) return { kind: 'unknown' };
  if (instanceId === null || worker.instanceId === null || worker.instanceId === instanceId) {
    return { kind: 'same', worker };
  }
  return { kind: 'other', holder: worker };
}
