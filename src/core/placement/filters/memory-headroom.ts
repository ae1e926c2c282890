/** Memory in use + reserved + this budget must stay within MEMORY_HEADROOM of the worker's total. */
import { memoryCommitted } from '../../../projections/queries.js';
import { formatSize } from '../../../shared/units.js';
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';

export const name = 'memory-headroom';
export const summary =
  'memory in use + reserved for calls in flight + this budget <= MEMORY_HEADROOM x total';

/** The most memory the worker may commit, in bytes (rounded: exactly the headroom passes). */
export function memoryLimit(total: number, headroom: number): number {
  return Math.round(total * headroom);
}

export const memoryHeadroom = {
  name,
  summary,
  check: (worker, budget, config) => {
    if (worker.memoryTotal === null || worker.memoryTotal <= 0) return Verdict.skip;
    const limit = memoryLimit(worker.memoryTotal, config.MEMORY_HEADROOM);
    return memoryCommitted(worker) + budget.memory <= limit ? Verdict.pass : Verdict.fail;
  },
  reason: (worker, budget, config, verdict) => {
    if (verdict === Verdict.skip) return 'skipped: the worker reported no memory total';
    const total = worker.memoryTotal ?? 0;
    const used = worker.utilization?.memoryUsed ?? 0;
    const sum = used + worker.reservedMemory + budget.memory;
    const limit = memoryLimit(total, config.MEMORY_HEADROOM);
    const words = `in use ${formatSize(used)} + reserved ${formatSize(worker.reservedMemory)} + budget ${formatSize(budget.memory)} = ${formatSize(sum)}`;
    const bound = `${formatSize(limit)} (${config.MEMORY_HEADROOM * 100}% of ${formatSize(total)})`;
    return verdict === Verdict.pass ? `${words} <= ${bound}` : `${words} exceeds ${bound}`;
  },
} satisfies Filter;
