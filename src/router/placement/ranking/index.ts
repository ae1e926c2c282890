/**
 * The ranking key, compared left to right, lowest wins: flavor penalty, memory pressure, CPU
 * pressure, calls in flight, and finally the worker ID compared as text, so there is never a tie.
 */
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import { compareText } from '../../../projections/queries.js';
import type { Budget } from '../call.js';
import type { RankTerm } from '../rank-term.js';
import { cpuPressure } from './cpu-pressure.js';
import { flavorPenalty } from './flavor-penalty.js';
import { inFlight } from './in-flight.js';
import { memoryPressure } from './memory-pressure.js';

/** The numeric terms, in the order they are compared; the worker ID breaks what ties remain. */
export const RANK_TERMS: readonly RankTerm[] = [
  flavorPenalty,
  memoryPressure,
  cpuPressure,
  inFlight,
];

/** Negative when `a` ranks before `b` for a call with `budget`. Allocates nothing. */
export function compareWorkers(a: WorkerRecord, b: WorkerRecord, budget: Budget): number {
  for (const term of RANK_TERMS) {
    const difference = term.value(a, budget) - term.value(b, budget);
    if (difference !== 0) return difference;
  }
  return compareText(a.workerId, b.workerId);
}

/**
 * Tracks the best-ranked worker seen so far while placement walks the candidates. The best
 * worker's key is kept, and a challenger's terms are computed one at a time only until they
 * differ, so most workers cost one or two term evaluations and nothing is allocated per worker.
 */
export class BestWorker {
  private readonly key = new Array<number>(RANK_TERMS.length).fill(0);
  private current: WorkerRecord | undefined;

  constructor(private readonly budget: Budget) {}

  /** The best worker so far. */
  get worker(): WorkerRecord | undefined {
    return this.current;
  }

  /**
   * Considers `worker`; it becomes the best if its key is lower. `RANK_TERMS` unrolled, so every
   * call site sees one function (a test checks that this agrees with `compareWorkers`).
   */
  offer(worker: WorkerRecord): void {
    const best = this.current;
    if (best === undefined) return this.adopt(worker);
    const key = this.key;
    const budget = this.budget;
    let value = flavorPenalty.value(worker, budget);
    if (value !== key[0]) return value < (key[0] as number) ? this.adopt(worker) : undefined;
    value = memoryPressure.value(worker);
    if (value !== key[1]) return value < (key[1] as number) ? this.adopt(worker) : undefined;
    value = cpuPressure.value(worker);
    if (value !== key[2]) return value < (key[2] as number) ? this.adopt(worker) : undefined;
    value = inFlight.value(worker);
    if (value !== key[3]) return value < (key[3] as number) ? this.adopt(worker) : undefined;
    if (compareText(worker.workerId, best.workerId) < 0) this.adopt(worker);
  }

  /** Makes `worker` the best, keeping its key. */
  private adopt(worker: WorkerRecord): void {
    this.current = worker;
    this.key[0] = flavorPenalty.value(worker, this.budget);
    this.key[1] = memoryPressure.value(worker);
    this.key[2] = cpuPressure.value(worker);
    this.key[3] = inFlight.value(worker);
  }
}

/** A worker's ranking key, term by term, ending with its ID (for explanations). */
export function rankKey(worker: WorkerRecord, budget: Budget): RankKey {
  return {
    terms: RANK_TERMS.map((term) => ({ name: term.name, value: term.value(worker, budget) })),
    workerId: worker.workerId,
  };
}

/** A worker's ranking key as explanations print it. */
export interface RankKey {
  readonly terms: readonly { readonly name: string; readonly value: number }[];
  readonly workerId: string;
}
