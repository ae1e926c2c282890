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
