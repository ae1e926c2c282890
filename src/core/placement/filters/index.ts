/**
 * Every placement filter, in the order they run and explanations list them (`FILTERS`, the one
 * owner of that order). All must pass.
 */
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import type { Config } from '../../../shared/config.js';
import type { Budget } from '../call.js';
import { Verdict, type Filter, type FilterStatus } from '../filter.js';
import { containerCount } from './container-count.js';
import { flavor } from './flavor.js';
import { gpuMemoryHeadroom } from './gpu-memory-headroom.js';
import { memoryHeadroom } from './memory-headroom.js';

/** The filters, in order. */
export const FILTERS = [flavor, memoryHeadroom, gpuMemoryHeadroom, containerCount] as const;

/**
 * The index in `FILTERS` of the first filter `worker` fails, or -1 when it passes them all.
 * Placement's hot path: it walks `FILTERS` by index, one call site per filter, so each site sees
 * one function and the compiler can inline it (a loop over the registry costs several times more
 * per worker). The order is the registry's; `_WALKED` makes the compiler refuse this walk once
 * the registry holds another number of filters.
 */
export function firstFailure(worker: WorkerRecord, budget: Budget, config: Config): number {
  if (FILTERS[0].check(worker, budget, config) === Verdict.fail) return 0;
  if (FILTERS[1].check(worker, budget, config) === Verdict.fail) return 1;
  if (FILTERS[2].check(worker, budget, config) === Verdict.fail) return 2;
  if (FILTERS[3].check(worker, budget, config) === Verdict.fail) return 3;
  return -1;
}

/** How many filters `firstFailure` walks: it must be every one of them. */
const _WALKED: (typeof FILTERS)['length'] = 4;

/** One filter's verdict on a worker, with its reason (for explanations). */
export interface ExplainedVerdict {
  readonly filter: Filter;
  readonly verdict: Verdict;
  readonly reason: string;
}

/** Every filter's verdict on `worker`, each with the reason its check gave in the same pass. */
export function explainFilters(
  worker: WorkerRecord,
  budget: Budget,
  config: Config,
): ExplainedVerdict[] {
  return FILTERS.map((filter: Filter) => {
    const status: FilterStatus = { reason: '' };
    const verdict = filter.check(worker, budget, config, status);
    return { filter, verdict, reason: status.reason };
  });
}
