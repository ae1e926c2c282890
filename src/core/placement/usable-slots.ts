/**
 * A tenant's usable slots: how many more calls of one budget placement would accept now. Each
 * worker that takes new calls is asked placement's own filters again and again, as if one more
 * call of that budget had been placed on it each time, until one fails; so the count follows the
 * rules placement applies (memory headroom, GPU memory, container limit, flavor) and no copy of
 * them. Pure. Today every tenant may use every free slot; a per-tenant limit would lower this.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import type { Budget } from './call.js';
import { firstFailure } from './filters/index.js';

/** The most slots counted on one worker (one that sets no limit at all would count forever). */
export const MAX_SLOTS_PER_WORKER = 4096;

/** Slots over the workers, and how many workers have any. */
export interface SlotCount {
  readonly slots: number;
  readonly workers: number;
}

/** How many more calls of `budget` placement would accept on `worker` now. */
export function workerSlots(worker: WorkerRecord, budget: Budget, config: Config): number {
  if (!isPlaceable(worker)) return 0;
  let slots = 0;
  while (slots < MAX_SLOTS_PER_WORKER) {
    const withMore: WorkerRecord = {
      ...worker,
      reservedMemory: worker.reservedMemory + slots * budget.memory,
      inFlight: worker.inFlight + slots,
      // Each new call also moves the worker's own count (see `reportedSlots`).
      reportedSlots: worker.reportedSlots === null ? null : worker.reportedSlots + slots,
    };
    if (firstFailure(withMore, budget, config) >= 0) break;
    slots += 1;
  }
  return slots;
}

/** Usable slots over every worker. */
export function usableSlots(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
): SlotCount {
  let slots = 0;
  let contributing = 0;
  for (const worker of workers) {
    const here = workerSlots(worker, budget, config);
    slots += here;
    if (here > 0) contributing += 1;
  }
  return { slots, workers: contributing };
}
