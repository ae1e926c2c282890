/** Keep GPU workers for GPU calls: a CPU call on a gpu worker ranks after every cpu worker. */
import type { RankTerm } from '../rank-term.js';

export const flavorPenalty: RankTerm<'flavor'> = {
  name: 'flavor-penalty',
  summary: '1 for a CPU call on a gpu worker, else 0',
  reads: ['flavor'],
  value: (worker, budget) => (!budget.gpuCall && worker.flavor === 'gpu' ? 1 : 0),
};
