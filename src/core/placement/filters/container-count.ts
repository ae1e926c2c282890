/** Containers held plus calls in flight must stay below the worker's maximum. */
import { heldContainers } from '../../../projections/queries.js';
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';

export const name = 'container-count';
export const summary = 'containers held + calls in flight < the worker maximum';

export const containerCount = {
  name,
  summary,
  check: (worker) => {
    if (worker.maxContainers === null || worker.maxContainers <= 0) return Verdict.skip;
    return heldContainers(worker) + worker.inFlight < worker.maxContainers
      ? Verdict.pass
      : Verdict.fail;
  },
  reason: (worker, _budget, _config, verdict) => {
    if (verdict === Verdict.skip) return 'skipped: the worker reported no container limit';
    const held = heldContainers(worker);
    const words = `${held} held + ${worker.inFlight} in flight = ${held + worker.inFlight}`;
    return verdict === Verdict.pass
      ? `${words} < max ${worker.maxContainers}`
      : `${words}, not below max ${worker.maxContainers}`;
  },
} satisfies Filter;
