/** Every placement filter, in the order they run and explanations list them. All must pass. */
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import type { Config } from '../../../shared/config.js';
import type { Budget } from '../call.js';
import { Verdict, type Filter } from '../filter.js';
import { containerCount } from './container-count.js';
import { flavor } from './flavor.js';
import { gpuMemoryHeadroom } from './gpu-memory-headroom.js';
import { memoryHeadroom } from './memory-headroom.js';

/** The filters, in order. */
export const FILTERS: readonly Filter[] = [
  flavor,
  memoryHeadroom,
  gpuMemoryHeadroom,
  containerCount,
];

/**
 * The index in `FILTERS` of the first filter `worker` fails, or -1 when it passes them all.
 * Placement's hot path: `FILTERS` unrolled, so every call site sees one function and the
 * compiler can inline it (a loop over the registry costs several times more per worker).
 * A test checks that it agrees with the registry.
 */
export function firstFailure(worker: WorkerRecord, budget: Budget, config: Config): number {
  if (flavor.check(worker, budget) === Verdict.fail) return 0;
  if (memoryHeadroom.check(worker, budget, config) === Verdict.fail) return 1;
  if (gpuMemoryHeadroom.check(worker, budget, config) === Verdict.fail) return 2;
  if (containerCount.check(worker) === Verdict.fail) return 3;
  return -1;
}
