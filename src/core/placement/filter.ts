/** The shape every placement filter has (one small named unit per file under `filters/`). */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { Budget } from './call.js';

/** A filter's verdict on one worker: it passes, it fails, or it does not apply (skipped). */
export const Verdict = { pass: 0, fail: 1, skip: 2 } as const;
/** A filter's verdict on one worker. */
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/** The name `replay explain` prints for a verdict. */
export function verdictName(verdict: Verdict): 'pass' | 'fail' | 'skip' {
  return verdict === Verdict.pass ? 'pass' : verdict === Verdict.fail ? 'fail' : 'skip';
}

/**
 * Where a filter says why it gave its verdict, in an operator's words (kube-scheduler's `Status`
 * from its `Filter` call): handed to `check` only when an explanation is being built.
 */
export interface FilterStatus {
  reason: string;
}

/**
 * A placement filter. `check` runs for every candidate of every call, so on that path (no
 * `status`) it allocates nothing; asked with a `status`, it writes there, in the same pass, the
 * words `replay explain` prints, built from the values the check itself computed.
 */
export interface Filter {
  /** The filter's name, as explanations and docs print it. */
  readonly name: string;
  /** One line: what the filter requires. */
  readonly summary: string;
  /** The verdict on `worker` for a call with `budget`; why, in `status` when one is given. */
  check(worker: WorkerRecord, budget: Budget, config: Config, status?: FilterStatus): Verdict;
}
