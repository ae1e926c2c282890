/** GPU memory in use + this GPU budget must stay within GPU_MEMORY_HEADROOM of the worker's. */
import { gpuMemoryInUse } from '../../../projections/queries.js';
import { formatSize } from '../../../shared/units.js';
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';
import { memoryLimit } from './memory-headroom.js';

export const name = 'gpu-memory-headroom';
export const summary = 'GPU memory in use + this GPU budget <= GPU_MEMORY_HEADROOM x GPU total';

/** The words of a verdict, from the values the check computed. */
function words(
  passed: boolean,
  used: number,
  budget: number,
  sum: number,
  limit: number,
  headroom: number,
  total: number,
): string {
  const terms = `GPU in use ${formatSize(used)} + budget ${formatSize(budget)} = ${formatSize(sum)}`;
  const bound = `${formatSize(limit)} (${headroom * 100}% of ${formatSize(total)})`;
  return passed ? `${terms} <= ${bound}` : `${terms} exceeds ${bound}`;
}

export const gpuMemoryHeadroom = {
  name,
  summary,
  check: (worker, budget, config, status?) => {
    if (budget.gpuMemory <= 0) {
      if (status) status.reason = 'skipped: the call has no GPU memory budget';
      return Verdict.skip;
    }
    const total = worker.gpuMemoryTotal;
    if (total === null || total <= 0) {
      if (status) status.reason = 'skipped: the worker offers no GPU memory';
      return Verdict.skip;
    }
    const headroom = config.GPU_MEMORY_HEADROOM;
    const limit = memoryLimit(total, headroom);
    const used = gpuMemoryInUse(worker);
    const sum = used + budget.gpuMemory;
    const passed = sum <= limit;
    if (status) status.reason = words(passed, used, budget.gpuMemory, sum, limit, headroom, total);
    return passed ? Verdict.pass : Verdict.fail;
  },
} satisfies Filter;
