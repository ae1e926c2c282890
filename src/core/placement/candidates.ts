/** Rule 2: which workers may receive a new call at all. */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';

/** Why a worker is not a candidate, or null when it is (last status ready, has an address). */
export function notCandidateReason(worker: WorkerRecord): string | null {
  if (isPlaceable(worker)) return null;
  switch (worker.status) {
    case 'error':
      return `registered with an error status: ${worker.error ?? 'no reason given'}`;
    case 'leaving':
      return 'leaving: it reported removed';
    case 'evicted':
      return `evicted (${worker.evictedReason ?? 'unknown reason'})`;
    case 'ready':
      return 'no address reported';
  }
}
