/**
 * "Never fits" (docs/placement.md): a call no ready worker could take even empty, because its
 * budget is above every worker's memory or GPU memory (after the headroom), or it is a GPU call
 * and no worker is a gpu worker. Asked only when no candidate passed the filters, so it costs
 * nothing on the hot path; a call that is not "never" does not fit *now*.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import { formatSize } from '../../shared/units.js';
import type { Budget } from './call.js';
import { memoryLimit } from './filters/memory-headroom.js';

/** The most memory (or GPU memory) a worker offers a call when it runs nothing: null, no bound. */
function offer(total: number | null, headroom: number): number | null {
  return total === null || total <= 0 ? null : memoryLimit(total, headroom);
}

/** Whether `worker`, empty, could take a call with `budget`. */
function fitsEmpty(worker: WorkerRecord, budget: Budget, config: Config): boolean {
  if (budget.gpuCall && worker.flavor !== 'gpu') return false;
  const memory = offer(worker.memoryTotal, config.MEMORY_HEADROOM);
  if (memory !== null && memory < budget.memory) return false;
  if (budget.gpuMemory > 0) {
    const gpu = offer(worker.gpuMemoryTotal, config.GPU_MEMORY_HEADROOM);
    if (gpu !== null && gpu < budget.gpuMemory) return false;
  }
  return true;
}

/** The largest of `offers` (null counts as no bound, so it is the largest). */
function largest(offers: readonly (number | null)[]): number | null {
  let most: number | null = 0;
  for (const value of offers) {
    if (value === null) return null;
    if (most !== null && value > most) most = value;
  }
  return most;
}

/**
 * Why no candidate could ever take a call with `budget` (the words of its refusal, naming the
 * largest offer), or null when one could once it has room. `workers` are every worker of the
 * state; candidates are the placeable ones the call may go to (not `unreachable`).
 */
export function neverFits(
  workers: Iterable<WorkerRecord>,
  budget: Budget,
  config: Config,
  unreachable: readonly string[],
): string | null {
  const candidates: WorkerRecord[] = [];
  for (const worker of workers) {
    if (!isPlaceable(worker) || unreachable.includes(worker.workerId)) continue;
    if (fitsEmpty(worker, budget, config)) return null;
    candidates.push(worker);
  }
  if (candidates.length === 0) return null;
  const lead = 'no worker can ever accept this request';
  const suited = budget.gpuCall ? candidates.filter((w) => w.flavor === 'gpu') : candidates;
  if (suited.length === 0) {
    return `${lead}: it is a GPU call and none of the ${candidates.length} ready workers is a gpu worker`;
  }
  const kind = budget.gpuCall ? 'gpu worker' : 'worker';
  const memory = largest(suited.map((w) => offer(w.memoryTotal, config.MEMORY_HEADROOM)));
  const gpu = largest(suited.map((w) => offer(w.gpuMemoryTotal, config.GPU_MEMORY_HEADROOM)));
  const parts: string[] = [];
  if (memory !== null && memory < budget.memory) {
    parts.push(
      `the largest ${kind} offers ${formatSize(memory)} of memory; this call asks ${formatSize(budget.memory)}`,
    );
  }
  if (budget.gpuMemory > 0 && gpu !== null && gpu < budget.gpuMemory) {
    parts.push(
      `the largest ${kind} offers ${formatSize(gpu)} of GPU memory; this call asks ${formatSize(budget.gpuMemory)}`,
    );
  }
  if (parts.length === 0) {
    parts.push(
      `no single ${kind} offers both ${formatSize(budget.memory)} of memory and ` +
        `${formatSize(budget.gpuMemory)} of GPU memory`,
    );
  }
  return `${lead}: ${parts.join(', and ')} (ask for less, or add a larger worker)`;
}
