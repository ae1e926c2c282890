/** Prefer the worker with fewer calls in flight. */
import type { RankTerm } from '../rank-term.js';

export const inFlight = {
  name: 'in-flight',
  summary: 'calls placed on the worker and not yet finished',
  value: (worker) => worker.inFlight,
} satisfies RankTerm;
