/**
 * Rules 2 to 4 over every worker: candidates, filters, ranking. The hot path walks the candidates
 * best first (see `candidate-order.ts`) and stops at the first that passes; the full walk is its
 * reference, and the explaining walk records every verdict instead.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { Budget } from './call.js';
import { notCandidateReason } from './candidates.js';
import type { ExplanationBuilder } from './explanation.js';
import type { Filter, Verdict } from './filter.js';
import { FILTERS, firstFailure } from './filters/index.js';
import { BestWorker } from './ranking/index.js';

/** What the walk found. */
export interface ScanResult {
  /** The best-ranked worker passing every filter, if any. */
  readonly best: WorkerRecord | undefined;
  /** How many workers were candidates. */
  readonly candidates: number;
  /** For each filter (in `FILTERS` order), how many candidates failed it first. */
  readonly failures: readonly number[];
}

/** Walks every worker once: the hot path. */
export function scanWorkers(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
): ScanResult {
  const ranking = new BestWorker(budget);
  const failures = new Array<number>(FILTERS.length).fill(0);
  let candidates = 0;
  for (const worker of workers) {
    if (worker.status !== 'ready' || worker.address === null || worker.address === '') continue;
    candidates += 1;
    const failed = firstFailure(worker, budget, config);
    if (failed < 0) ranking.offer(worker);
    else failures[failed] = (failures[failed] as number) + 1;
  }
  return { best: ranking.worker, candidates, failures };
}

/**
 * The same answer as `scanWorkers`, from the candidates already sorted best first: the first that
 * passes every filter wins, so a cluster with room costs one or two filter checks per decision.
 * When none passes every candidate was checked, so the counts are those of the full walk.
 */
export function scanInRankOrder(
  candidates: readonly WorkerRecord[],
  budget: Budget,
  config: Config,
): ScanResult {
  const failures = new Array<number>(FILTERS.length).fill(0);
  for (const worker of candidates) {
    const failed = firstFailure(worker, budget, config);
    if (failed < 0) return { best: worker, candidates: candidates.length, failures };
    failures[failed] = (failures[failed] as number) + 1;
  }
  return { best: undefined, candidates: candidates.length, failures };
}

/** Walks every worker like `scanWorkers`, recording candidacy and every filter's verdict. */
export function explainScan(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
  explain: ExplanationBuilder,
): ScanResult {
  const ranking = new BestWorker(budget);
  const failures = new Array<number>(FILTERS.length).fill(0);
  let candidates = 0;
  for (const worker of workers) {
    const why = notCandidateReason(worker);
    if (why !== null) {
      explain.notCandidate(worker, why);
      continue;
    }
    candidates += 1;
    const verdicts = FILTERS.map(
      (filter) => [filter, filter.check(worker, budget, config)] as [Filter, Verdict],
    );
    const failed = verdicts.findIndex(([, verdict]) => verdict === 1);
    explain.candidate(worker, verdicts, failed < 0);
    if (failed < 0) ranking.offer(worker);
    else failures[failed] = (failures[failed] as number) + 1;
  }
  return { best: ranking.worker, candidates, failures };
}
