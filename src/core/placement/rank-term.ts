/** The shape every ranking term has (one small named unit per file under `ranking/`). */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { Budget } from './call.js';

/** One component of the ranking key: lower is better; keys compare left to right. */
export interface RankTerm {
  /** The term's name, as explanations and docs print it. */
  readonly name: string;
  /** One line: what the term measures. */
  readonly summary: string;
  /** The term's value for `worker` and a call with `budget`. */
  value(worker: WorkerRecord, budget: Budget): number;
}
