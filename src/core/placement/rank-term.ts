/** The shape every ranking term has (one small named unit per file under `ranking/`). */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { Budget } from './call.js';

/**
 * One component of the ranking key: lower is better; keys compare left to right. A term declares
 * the worker fields it reads, and its `value` is handed only those (the compiler refuses a term
 * that reads another), so what a key depends on is written down where the key is computed.
 */
export interface RankTerm<F extends keyof WorkerRecord = keyof WorkerRecord> {
  /** The term's name, as explanations and docs print it. */
  readonly name: string;
  /** One line: what the term measures. */
  readonly summary: string;
  /** The worker fields `value` reads. */
  readonly reads: readonly F[];
  /** The term's value for `worker` and a call with `budget`. */
  value(worker: Pick<WorkerRecord, F>, budget: Budget): number;
}
