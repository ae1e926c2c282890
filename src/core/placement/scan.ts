/**
 * Rules 2 to 4: candidates, filters, ranking. The hot path walks the candidates best first (see
 * `candidate-index.ts`) and stops at the first that passes; without an index, a full walk picks the
 * best that passes; the explaining walk checks every worker against the registries and records
 * every verdict. All three give the same answer (property tests check this). A call placed again
 * after a failed dial leaves out the workers it could not reach (`unreachable`).
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import type { Budget } from './call.js';
import { notCandidateReason } from './candidates.js';
import type { ExplanationBuilder } from './explanation.js';
import type { RankedCandidates } from './candidate-index.js';
import { Verdict } from './filter.js';
import { explainFilters, FILTERS, firstFailure } from './filters/index.js';
import { flavor } from './filters/flavor.js';
import { compareWorkers } from './ranking/index.js';

/** Where the flavor filter's failures are counted. */
const FLAVOR_FILTER = FILTERS.indexOf(flavor);

/**
 * What the filters and the ranking made of the candidates (rules 2 to 4), whichever the kind of
 * call (a pinned call's scan of its subset says the same).
 */
export interface Scan {
  /** The worker the ranking puts first among those that pass every filter, if any. */
  readonly best: WorkerRecord | undefined;
  /** How many workers were candidates. */
  readonly candidates: number;
  /**
   * For each filter (in `FILTERS` order), how many candidates failed it first: why no worker
   * could take the call (an admission step would tell "never fits" from "not now" from these).
   */
  readonly failures: readonly number[];
}

/**
 * The hot path: from the candidates sorted best first (`candidate-index.ts`), the first that
 * passes every filter wins, so a cluster with room costs one or two filter checks per decision.
 * A GPU call starts at the first gpu worker: the cpu workers before it fail its flavor filter.
 * When none passes every candidate was counted, so the counts are those of a full walk.
 */
export function scanInRankOrder(
  candidates: RankedCandidates,
  budget: Budget,
  config: Config,
): Scan {
  const failures = new Array<number>(FILTERS.length).fill(0);
  const start = budget.gpuCall ? candidates.firstGpu : 0;
  failures[FLAVOR_FILTER] = start;
  for (let i = start; i < candidates.length; i += 1) {
    const worker = candidates.at(i).worker;
    const failed = firstFailure(worker, budget, config);
    if (failed < 0) return { best: worker, candidates: candidates.length, failures };
    failures[failed] = (failures[failed] as number) + 1;
  }
  return { best: undefined, candidates: candidates.length, failures };
}

/**
 * Without an index: every worker once, keeping the best-ranked candidate that passes every
 * filter (`compareWorkers`, the registry of ranking terms). Linear in the workers, no sort.
 */
export function scanAll(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
  unreachable: readonly string[] = [],
): Scan {
  const failures = new Array<number>(FILTERS.length).fill(0);
  let best: WorkerRecord | undefined;
  let candidates = 0;
  for (const worker of workers) {
    if (!isPlaceable(worker)) continue;
    if (unreachable.length > 0 && unreachable.includes(worker.workerId)) continue;
    candidates += 1;
    const failed = firstFailure(worker, budget, config);
    if (failed >= 0) failures[failed] = (failures[failed] as number) + 1;
    else if (best === undefined || compareWorkers(worker, best, budget) < 0) best = worker;
  }
  return { best, candidates, failures };
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
  unreachable: readonly string[] = [],
): Scan {
  const eligible: WorkerRecord[] = [];
  const failures = new Array<number>(FILTERS.length).fill(0);
  let candidates = 0;
  for (const worker of workers) {
    const why = unreachable.includes(worker.workerId)
      ? 'an earlier attempt of this call could not reach it (a failed dial)'
      : notCandidateReason(worker);
    if (why !== null) {
      explain.notCandidate(worker, why);
      continue;
    }
    candidates += 1;
    const verdicts = explainFilters(worker, budget, config);
    const failed = verdicts.findIndex(({ verdict }) => verdict === Verdict.fail);
    explain.candidate(worker, verdicts, failed < 0);
    if (failed < 0) eligible.push(worker);
    else failures[failed] = (failures[failed] as number) + 1;
  }
  eligible.sort((a, b) => compareWorkers(a, b, budget));
  explain.ranking(eligible.map((worker) => worker.workerId));
  return { best: eligible[0], candidates, failures };
}
