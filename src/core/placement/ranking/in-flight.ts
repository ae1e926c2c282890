/** Prefer the worker with fewer calls in flight. */
import type { RankTerm } from '../rank-term.js';

export const inFlight: RankTerm<'inFlight'> = {
  name: 'in-flight',
  summary: 'calls placed on the worker and not yet finished',
  reads: ['inFlight'],
  value: (worker) => worker.inFlight,
};
