/**
 * The candidates (rule 2) kept sorted by their ranking key (rule 4), so placement can walk them
 * best first and stop at the first that passes every filter instead of walking all of them.
 *
 * The index belongs to whoever owns the state it serves (the router, the replayer) and is passed
 * to placement with it. It is kept in step by the fold: the owner folds with the index as the
 * `WorkerChangeSink` (`projections/worker-changes.ts`), which hears of every worker an event
 * changes, and before each use the index moves just those workers. It is correct by construction:
 * each entry holds the key it is sorted by, computed from the worker when it last changed by the
 * terms that declare what they read (`rank-term.ts`), so no change to a record can leave a key
 * stale; and the fold reports every worker it changes. A map it was not fed from (an immutable
 * state, another log, a Snapshot's new state) rebuilds it. The walk's answer is exactly the full
 * scan's (property tests check this).
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { compareText, isPlaceable } from '../../projections/queries.js';
import type { WorkerChangeSink } from '../../projections/worker-changes.js';
import type { Budget } from './call.js';
import { RANK_TERMS } from './ranking/index.js';
import type { RankTerm } from './rank-term.js';
import { containerCount } from './filters/container-count.js';
import { Verdict } from './filter.js';
import { BlockList } from './block-list.js';
import { DEFAULT_CONFIG } from '../../shared/config.js';

/** The ranking of a CPU call: every order below is this one (see `RankedCandidate`). */
const CPU_CALL: Budget = { memory: 0, gpuMemory: 0, gpuCall: false };

/**
 * A candidate as the index holds it: its live record and the key it is sorted by, the ranking
 * terms' values for a CPU call as they were when the worker last changed (`k0` to `k3`, in
 * `RANK_TERMS` order). The key is held in the entry itself, not in an array beside it: a binary
 * search compares keys of entries all over the heap, and each hop is a likely cache miss.
 */
export interface RankedCandidate {
  readonly worker: WorkerRecord;
  readonly k0: number;
  readonly k1: number;
  readonly k2: number;
  readonly k3: number;
  /** Whether it passed the container-count filter (which no budget changes) when it last changed. */
  readonly room: boolean;
  /** Whether it is a gpu worker (they rank after every cpu worker). */
  readonly gpu: boolean;
}

/** The ranking terms the entries hold, one field each: there must be exactly as many. */
const KEY_TERMS = 4;
if (RANK_TERMS.length !== KEY_TERMS) {
  throw new Error(
    `the candidate index holds ${KEY_TERMS} ranking terms; there are ${RANK_TERMS.length}`,
  );
}
const [TERM0, TERM1, TERM2, TERM3] = RANK_TERMS as readonly [
  RankTerm,
  RankTerm,
  RankTerm,
  RankTerm,
];

/** Whether `worker` passes the container-count filter (it reads no budget). */
function hasRoom(worker: WorkerRecord): boolean {
  return containerCount.check(worker, CPU_CALL, DEFAULT_CONFIG) !== Verdict.fail;
}

/**
 * Negative when `a` ranks before `b`: their keys left to right, then their IDs as text. -1 or 1,
 * not the keys' difference: a fraction returned from a call not inlined is a heap number made for
 * every comparison.
 */
function compareCandidates(a: RankedCandidate, b: RankedCandidate): number {
  let order = compareTerm(a.k0 - b.k0);
  if (order !== 0) return order;
  order = compareTerm(a.k1 - b.k1);
  if (order !== 0) return order;
  order = compareTerm(a.k2 - b.k2);
  if (order !== 0) return order;
  order = compareTerm(a.k3 - b.k3);
  if (order !== 0) return order;
  return compareText(a.worker.workerId, b.worker.workerId);
}

/**
 * -1, 1 or 0 by the sign of one term's difference; NaN for a term that is not a number (none is),
 * which its comparison says, as its difference did.
 */
function compareTerm(difference: number): number {
  if (difference < 0) return -1;
  if (difference > 0) return 1;
  return difference === 0 ? 0 : Number.NaN;
}

/**
 * The candidates in ranking order, as placement walks them: best first, from 0 to `length - 1`
 * (walking forward is cheap; see `BlockList`).
 */
export interface RankedCandidates {
  readonly length: number;
  at(index: number): RankedCandidate;
  /** The index of the first gpu worker (`length` when none is a candidate): cpu workers come first. */
  readonly firstGpu: number;
}

/** Placement's candidates in ranking order, kept in step with one workers map by its fold. */
export class CandidateIndex implements WorkerChangeSink, RankedCandidates {
  /** The workers map the index was built from. */
  private source: ReadonlyMap<string, WorkerRecord> | undefined;
  /** Every worker of the source by ID: its entry when it is a candidate, else null. */
  private entries = new Map<string, RankedCandidate | null>();
  /** The candidates, best first. */
  private readonly sorted = new BlockList<RankedCandidate>(compareCandidates);
  /** Workers the fold changed since the index last looked. */
  private readonly changed = new Set<string>();
  /** How many candidates pass the container-count filter. */
  private roomy = 0;
  /** How many candidates are gpu workers. */
  private gpu = 0;

  /** The fold changed (or added) a worker of the map the index serves. */
  workerChanged(workerId: string): void {
    this.changed.add(workerId);
  }

  /**
   * The candidates of `workers`, best first: the index itself, valid until the fold changes a
   * worker (do not keep it).
   */
  candidates(workers: ReadonlyMap<string, WorkerRecord>): RankedCandidates {
    if (workers === this.source && this.changed.size > 0) this.catchUp(workers);
    // Another map, or one holding workers the fold never reported: start over.
    if (workers !== this.source || this.entries.size !== workers.size) this.rebuild(workers);
    return this;
  }

  get length(): number {
    return this.sorted.length;
  }

  at(index: number): RankedCandidate {
    return this.sorted.at(index);
  }

  get firstGpu(): number {
    return this.sorted.length - this.gpu;
  }

  /**
   * How many candidates of `workers` have a free container slot (pass the container-count
   * filter, whatever the budget): with none, no call that needs a new container fits now.
   */
  withRoom(workers: ReadonlyMap<string, WorkerRecord>): number {
    this.candidates(workers);
    return this.roomy;
  }

  /** Moves the workers the fold reported since the index last looked. */
  private catchUp(workers: ReadonlyMap<string, WorkerRecord>): void {
    for (const workerId of this.changed) {
      const record = workers.get(workerId);
      const previous = this.entries.get(workerId) ?? null;
      const next = record !== undefined && isPlaceable(record) ? this.entryOf(record) : null;
      this.move(previous, next);
      if (record !== undefined) this.entries.set(workerId, next);
      else this.entries.delete(workerId);
    }
    this.changed.clear();
  }

  private entryOf(worker: WorkerRecord): RankedCandidate {
    return {
      worker,
      k0: TERM0.value(worker, CPU_CALL),
      k1: TERM1.value(worker, CPU_CALL),
      k2: TERM2.value(worker, CPU_CALL),
      k3: TERM3.value(worker, CPU_CALL),
      room: hasRoom(worker),
      gpu: worker.flavor === 'gpu',
    };
  }

  /** Replaces `previous` by `next` among the candidates (either may be null: not a candidate). */
  private move(previous: RankedCandidate | null, next: RankedCandidate | null): void {
    if (previous !== null) {
      this.sorted.remove(previous);
      this.count(previous, -1);
    }
    if (next !== null) {
      this.sorted.insert(next);
      this.count(next, 1);
    }
  }

  /** Counts `entry` in (`by` 1) or out (-1) of the tallies of candidates with room and gpu ones. */
  private count(entry: RankedCandidate, by: 1 | -1): void {
    if (entry.room) this.roomy += by;
    if (entry.gpu) this.gpu += by;
  }

  private rebuild(workers: ReadonlyMap<string, WorkerRecord>): void {
    this.source = workers;
    this.changed.clear();
    this.entries = new Map();
    this.roomy = 0;
    this.gpu = 0;
    const candidates: RankedCandidate[] = [];
    for (const [workerId, worker] of workers) {
      const entry = isPlaceable(worker) ? this.entryOf(worker) : null;
      this.entries.set(workerId, entry);
      if (entry === null) continue;
      candidates.push(entry);
      this.count(entry, 1);
    }
    this.sorted.reset(candidates);
  }
}
