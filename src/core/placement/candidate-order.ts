/**
 * The candidates (rule 2) kept sorted by their ranking key (rule 4), so placement can walk them
 * best first and stop at the first that passes every filter instead of walking all of them.
 *
 * The order is a cache kept between decisions, for the workers map it was built from. The event
 * log and replay change one working copy of the state in place; it reports which workers it
 * replaced (`projections/worker-changes.ts`), and a changed worker is always a new object (the
 * projection copies a record before changing it: `projections/evolve.ts`), so the record last
 * seen still holds the key the worker was sorted by. Each call moves only the replaced workers,
 * by binary search. Any other map (an immutable state, another log) rebuilds the order.
 * The walk's answer is exactly the full scan's (property tests check this).
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import { watchWorkers, type WorkerChanges } from '../../projections/worker-changes.js';
import type { Budget } from './call.js';
import { compareWorkers } from './ranking/index.js';

/** The ranking of a CPU call: every order below is this one (see the top of this file). */
const CPU_CALL: Budget = { memory: 0, gpuMemory: 0, gpuCall: false };

/**
 * Ranking order for a CPU call. A GPU call ranks gpu workers the same way among themselves (its
 * flavor penalty is 0 for all of them, as a CPU call's is 1) and its flavor filter fails the
 * rest, so one order serves both.
 */
function rankOrder(a: WorkerRecord, b: WorkerRecord): number {
  return compareWorkers(a, b, CPU_CALL);
}

/** The first index in `sorted` whose worker does not rank before `worker`. */
function lowerBound(sorted: readonly WorkerRecord[], worker: WorkerRecord): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (rankOrder(sorted[middle] as WorkerRecord, worker) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** The index of the first gpu worker in candidates sorted by `rankOrder` (cpu workers come first). */
export function firstGpuWorker(sorted: readonly WorkerRecord[]): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((sorted[middle] as WorkerRecord).flavor !== 'gpu') low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Candidates in ranking order, kept up to date from the changes of one workers map. */
export class CandidateOrder {
  /** The workers map the order was built from, and its records as they were last seen. */
  private source: ReadonlyMap<string, WorkerRecord> | undefined;
  private known = new Map<string, WorkerRecord>();
  /** The candidates among `known`, sorted by `rankOrder`. */
  private sorted: WorkerRecord[] = [];
  /** The IDs of the workers the source map replaced since the order last looked. */
  private readonly changes: WorkerChanges = { ids: [], overflowed: false };

  /** The candidates of `workers`, best first. The array is owned by this object: do not keep it. */
  of(workers: ReadonlyMap<string, WorkerRecord>): readonly WorkerRecord[] {
    if (workers !== this.source || !this.catchUp(workers)) this.rebuild(workers);
    return this.sorted;
  }

  /**
   * Moves the workers the source map reports replaced since last time; false when the journal
   * lost track or a worker was added, and the order must be rebuilt.
   */
  private catchUp(workers: ReadonlyMap<string, WorkerRecord>): boolean {
    const { ids, overflowed } = this.changes;
    if (overflowed || workers.size !== this.known.size) return false;
    for (const workerId of ids) {
      const previous = this.known.get(workerId);
      const record = workers.get(workerId);
      if (previous === undefined || record === undefined) return false;
      if (record === previous) continue;
      this.move(previous, record);
      this.known.set(workerId, record);
    }
    ids.length = 0;
    return true;
  }

  /**
   * Replaces `previous` by `next` in the sorted candidates (either may not be a candidate),
   * shifting only the workers between its old and new places.
   */
  private move(previous: WorkerRecord, next: WorkerRecord): void {
    const sorted = this.sorted;
    const wasCandidate = isPlaceable(previous);
    const isCandidate = isPlaceable(next);
    if (!wasCandidate) {
      if (isCandidate) sorted.splice(lowerBound(sorted, next), 0, next);
      return;
    }
    const from = lowerBound(sorted, previous);
    if (!isCandidate) {
      sorted.splice(from, 1);
      return;
    }
    let to = lowerBound(sorted, next);
    if (to > from) {
      to -= 1;
      for (let i = from; i < to; i += 1) sorted[i] = sorted[i + 1] as WorkerRecord;
    } else {
      for (let i = from; i > to; i -= 1) sorted[i] = sorted[i - 1] as WorkerRecord;
    }
    sorted[to] = next;
  }

  private rebuild(workers: ReadonlyMap<string, WorkerRecord>): void {
    this.source = workers;
    this.known = new Map(workers);
    this.sorted = [...workers.values()].filter(isPlaceable).sort(rankOrder);
    watchWorkers(workers, this.changes);
  }
}
