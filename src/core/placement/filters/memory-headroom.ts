/** Memory in use + reserved + this budget must stay within MEMORY_HEADROOM of the worker's total. */
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

/** The words of a verdict, from the values the check computed. */
function words(
  passed: boolean,
  used: number,
  reserved: number,
  budget: number,
  sum: number,
  limit: number,
  headroom: number,
  total: number,
): string {
  const terms = `in use ${formatSize(used)} + reserved ${formatSize(reserved)} + budget ${formatSize(budget)} = ${formatSize(sum)}`;
  const bound = `${formatSize(limit)} (${headroom * 100}% of ${formatSize(total)})`;
  return passed ? `${terms} <= ${bound}` : `${terms} exceeds ${bound}`;
}

export const memoryHeadroom = {
  name,
  summary,
  check: (worker, budget, config, status?) => {
    const total = worker.memoryTotal;
    if (total === null || total <= 0) {
      if (status) status.reason = 'skipped: the worker reported no memory total';
      return Verdict.skip;
    }
    const headroom = config.MEMORY_HEADROOM;
    const limit = memoryLimit(total, headroom);
    const used = worker.utilization?.memoryUsed ?? 0;
    // In use + reserved (what `memoryCommitted` sums, and memory pressure ranks by) + the budget.
    const sum = used + worker.reservedMemory + budget.memory;
    const passed = sum <= limit;
    if (status) {
      status.reason = words(
        passed,
        used,
        worker.reservedMemory,
        budget.memory,
        sum,
        limit,
        headroom,
        total,
      );
    }
    return passed ? Verdict.pass : Verdict.fail;
  },
} satisfies Filter;
