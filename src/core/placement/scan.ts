/**
 * Rules 2 to 4: candidates, filters, ranking. The hot path walks the candidates best first (see
 * `candidate-order.ts`) and stops at the first that passes; the explaining walk checks every worker
 * against the registries and records every verdict.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { Budget } from './call.js';
import { notCandidateReason } from './candidates.js';
import type { ExplanationBuilder } from './explanation.js';
import { firstGpuWorker } from './candidate-order.js';
import { Verdict, type Filter } from './filter.js';
import { FILTERS, firstFailure } from './filters/index.js';
import { flavor } from './filters/flavor.js';
import { compareWorkers } from './ranking/index.js';

/** Where the flavor filter's failures are counted. */
const FLAVOR_FILTER = FILTERS.indexOf(flavor);

/** What the walk found. */
export interface ScanResult {
  /** The best-ranked worker passing every filter, if any. */
  readonly best: WorkerRecord | undefined;
  /** How many workers were candidates. */
  readonly candidates: number;
  /** For each filter (in `FILTERS` order), how many candidates failed it first. */
  readonly failures: readonly number[];
}

/**
 * The hot path: from the candidates sorted best first (`candidate-order.ts`), the first that
 * passes every filter wins, so a cluster with room costs one or two filter checks per decision.
 * A GPU call starts at the first gpu worker: the cpu workers before it fail its flavor filter.
 * When none passes every candidate was counted, so the counts are those of a full walk.
 */
export function scanInRankOrder(
  candidates: readonly WorkerRecord[],
  budget: Budget,
  config: Config,
): ScanResult {
  const failures = new Array<number>(FILTERS.length).fill(0);
  const start = budget.gpuCall ? firstGpuWorker(candidates) : 0;
  failures[FLAVOR_FILTER] = start;
  for (let i = start; i < candidates.length; i += 1) {
    const worker = candidates[i] as WorkerRecord;
    const failed = firstFailure(worker, budget, config);
    if (failed < 0) return { best: worker, candidates: candidates.length, failures };
    failures[failed] = (failures[failed] as number) + 1;
  }
  return { best: undefined, candidates: candidates.length, failures };
}

/**
 * Walks every worker, recording candidacy and every filter's verdict, and ranks the eligible ones
 * by `compareWorkers` (the registry of ranking terms): the same answer as the hot path.
 */
export function explainScan(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
  explain: ExplanationBuilder,
): ScanResult {
  const eligible: WorkerRecord[] = [];
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
    const failed = verdicts.findIndex(([, verdict]) => verdict === Verdict.fail);
    explain.candidate(worker, verdicts, failed < 0);
    if (failed < 0) eligible.push(worker);
    else failures[failed] = (failures[failed] as number) + 1;
  }
  eligible.sort((a, b) => compareWorkers(a, b, budget));
  explain.ranking(eligible.map((worker) => worker.workerId));
  return { best: eligible[0], candidates, failures };
}
