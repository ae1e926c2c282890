/**
 * The candidates (rule 2) kept sorted by their ranking key (rule 4), so placement can walk them
 * best first and stop at the first that passes every filter instead of walking all of them.
 *
 * The order is derived from the workers map alone and kept between decisions. A worker that changes
 * is always a new object (immer's copies, or the projection's copy-on-write over a working copy:
 * see `projections/evolve.ts`), even where the map itself is changed in place, so a worker whose
 * record is the same object as last time has not changed. A new map (immutable states) is compared
 * record by record (a few nanoseconds per worker); a map changed in place (the event log's and
 * replay's working copy) reports which workers it replaced (`projections/worker-changes.ts`), so
 * only those are looked at. Changed workers move by binary search; the order is rebuilt from
 * scratch when workers were added or too many changed.
 * It is a cache: the walk's answer is exactly the full scan's (a property test checks this).
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { compareText, isPlaceable } from '../../projections/queries.js';
import { watchWorkers, type WorkerChanges } from '../../projections/worker-changes.js';
import { cpuPressure } from './ranking/cpu-pressure.js';
import { inFlight } from './ranking/in-flight.js';
import { memoryPressure } from './ranking/memory-pressure.js';

/**
 * Ranking order for a CPU call: cpu workers before gpu workers (the flavor penalty), then memory
 * pressure, CPU pressure, calls in flight, worker ID. A GPU call ranks gpu workers the same way
 * among themselves (its flavor penalty is 0 for all of them) and its flavor filter fails the rest,
 * so one order serves both.
 */
export function compareForCpuCall(a: WorkerRecord, b: WorkerRecord): number {
  let difference = (a.flavor === 'gpu' ? 1 : 0) - (b.flavor === 'gpu' ? 1 : 0);
  if (difference !== 0) return difference;
  difference = memoryPressure.value(a) - memoryPressure.value(b);
  if (difference !== 0) return difference;
  difference = cpuPressure.value(a) - cpuPressure.value(b);
  if (difference !== 0) return difference;
  difference = inFlight.value(a) - inFlight.value(b);
  if (difference !== 0) return difference;
  return compareText(a.workerId, b.workerId);
}

/** The first index in `sorted` whose worker does not rank before `worker`. */
function lowerBound(sorted: readonly WorkerRecord[], worker: WorkerRecord): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareForCpuCall(sorted[middle] as WorkerRecord, worker) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Past this many changed workers a full re-sort is cheaper than moving them one by one. */
const MOST_MOVES = 64;

/** Candidates in ranking order, updated incrementally from one workers map to the next. */
export class CandidateOrder {
  /** The records of `source`, in its iteration order. */
  private records: WorkerRecord[] = [];
  /** The candidates among `records`, sorted by `compareForCpuCall`. */
  private sorted: WorkerRecord[] = [];
  /** Scratch for `update`: positions in `records` whose record changed, and the new records. */
  private readonly changedAt: number[] = [];
  private readonly changedTo: WorkerRecord[] = [];

  /** The workers map last seen, its watched changes since, and where each worker sits in `records`. */
  private source: ReadonlyMap<string, WorkerRecord> | undefined;
  private readonly changes: WorkerChanges = { ids: [], overflowed: false };
  private positions = new Map<string, number>();

  /** The candidates of `workers`, best first. The array is owned by this object: do not keep it. */
  of(workers: ReadonlyMap<string, WorkerRecord>): readonly WorkerRecord[] {
    if (workers === this.source && this.catchUp(workers)) return this.sorted;
    if (!this.update(workers)) this.rebuild(workers);
    this.source = workers;
    watchWorkers(workers, this.changes);
    return this.sorted;
  }

  /**
   * Moves the workers the watched map reports changed since last time (a map changed in place);
   * false when the journal lost track or a worker was added, and every worker must be compared.
   */
  private catchUp(workers: ReadonlyMap<string, WorkerRecord>): boolean {
    const { ids, overflowed } = this.changes;
    if (overflowed || workers.size !== this.records.length) return false;
    for (const workerId of ids) {
      const position = this.positions.get(workerId);
      const record = workers.get(workerId);
      if (position === undefined || record === undefined) return false;
      const previous = this.records[position] as WorkerRecord;
      if (record === previous) continue;
      this.move(previous, record);
      this.records[position] = record;
    }
    ids.length = 0;
    return true;
  }

  /** Moves the changed records; false when the map's shape changed and a rebuild is due. */
  private update(workers: ReadonlyMap<string, WorkerRecord>): boolean {
    const records = this.records;
    if (workers.size !== records.length) return false;
    const { changedAt, changedTo } = this;
    changedAt.length = 0;
    changedTo.length = 0;
    let index = 0;
    for (const record of workers.values()) {
      const previous = records[index] as WorkerRecord;
      if (record !== previous) {
        if (record.workerId !== previous.workerId || changedAt.length === MOST_MOVES) return false;
        changedAt.push(index);
        changedTo.push(record);
      }
      index += 1;
    }
    for (let i = 0; i < changedAt.length; i += 1) {
      const position = changedAt[i] as number;
      const record = changedTo[i] as WorkerRecord;
      this.move(records[position] as WorkerRecord, record);
      records[position] = record;
    }
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
    this.records = [...workers.values()];
    this.positions = new Map(this.records.map((record, index) => [record.workerId, index]));
    this.sorted = this.records.filter(isPlaceable).sort(compareForCpuCall);
  }
}
