/** Prefer the emptier worker: memory in use plus reserved, over its total. */
import { memoryCommitted } from '../../../projections/queries.js';
import type { RankTerm } from '../rank-term.js';

export const memoryPressure: RankTerm<'memoryTotal' | 'utilization' | 'reservedMemory'> = {
  name: 'memory-pressure',
  summary: '(memory in use + reserved) / total, 0 when no total was reported',
  reads: ['memoryTotal', 'utilization', 'reservedMemory'],
  value: (worker) =>
    worker.memoryTotal === null || worker.memoryTotal <= 0
      ? 0
      : memoryCommitted(worker) / worker.memoryTotal,
};
