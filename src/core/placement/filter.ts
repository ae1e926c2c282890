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
 * A placement filter. `check` runs for every candidate of every call, so it allocates nothing;
 * `reason` builds the words `replay explain` prints, only when an explanation is asked for.
 */
export interface Filter {
  /** The filter's name, as explanations and docs print it. */
  readonly name: string;
  /** One line: what the filter requires. */
  readonly summary: string;
  /** The verdict on `worker` for a call with `budget`. */
  check(worker: WorkerRecord, budget: Budget, config: Config): Verdict;
  /** Why `check` gave `verdict`, in an operator's words. */
  reason(worker: WorkerRecord, budget: Budget, config: Config, verdict: Verdict): string;
}
