/** GPU memory in use + this GPU budget must stay within GPU_MEMORY_HEADROOM of the worker's. */
import { gpuMemoryInUse } from '../../../projections/queries.js';
import { formatSize } from '../../../shared/units.js';
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';
import { memoryLimit } from './memory-headroom.js';

export const name = 'gpu-memory-headroom';
export const summary = 'GPU memory in use + this GPU budget <= GPU_MEMORY_HEADROOM x GPU total';

export const gpuMemoryHeadroom = {
  name,
  summary,
  check: (worker, budget, config) => {
    if (budget.gpuMemory <= 0) return Verdict.skip;
    if (worker.gpuMemoryTotal === null || worker.gpuMemoryTotal <= 0) return Verdict.skip;
    const limit = memoryLimit(worker.gpuMemoryTotal, config.GPU_MEMORY_HEADROOM);
    return gpuMemoryInUse(worker) + budget.gpuMemory <= limit ? Verdict.pass : Verdict.fail;
  },
  reason: (worker, budget, config, verdict) => {
    if (budget.gpuMemory <= 0) return 'skipped: the call has no GPU memory budget';
    const total = worker.gpuMemoryTotal ?? 0;
    if (verdict === Verdict.skip) return 'skipped: the worker offers no GPU memory';
    const used = gpuMemoryInUse(worker);
    const limit = memoryLimit(total, config.GPU_MEMORY_HEADROOM);
    const words = `GPU in use ${formatSize(used)} + budget ${formatSize(budget.gpuMemory)} = ${formatSize(used + budget.gpuMemory)}`;
    const bound = `${formatSize(limit)} (${config.GPU_MEMORY_HEADROOM * 100}% of ${formatSize(total)})`;
    return verdict === Verdict.pass ? `${words} <= ${bound}` : `${words} exceeds ${bound}`;
  },
} satisfies Filter;
