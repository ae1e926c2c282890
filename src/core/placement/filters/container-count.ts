/**
 * The container slots the worker holds must stay below its maximum (`WORKER_MAX_EXECUTORS`), the
 * way the worker counts them: each call in flight once (a new container, or a session's container
 * it reuses), plus each idle or session-kept container; never fewer than the worker's own last
 * count says (`slotsCounted`).
 */
import { slotsCounted, slotsSeen } from '../../../projections/queries.js';
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';

export const name = 'container-count';
export const summary =
  'calls in flight + idle containers held (never below the worker count) < the worker maximum';

export const containerCount = {
  name,
  summary,
  check: (worker) => {
    if (worker.maxContainers === null || worker.maxContainers <= 0) return Verdict.skip;
    return slotsCounted(worker) < worker.maxContainers ? Verdict.pass : Verdict.fail;
  },
  reason: (worker, _budget, _config, verdict) => {
    if (verdict === Verdict.skip) return 'skipped: the worker reported no container limit';
    const seen = slotsSeen(worker);
    const counted = slotsCounted(worker);
    let words = `${worker.inFlight} in flight + ${worker.idleContainers} idle = ${seen}`;
    if (counted > seen) words += `; by the worker's own count ${counted}`;
    return verdict === Verdict.pass
      ? `${words} < max ${worker.maxContainers}`
      : `${words}, not below max ${worker.maxContainers}`;
  },
} satisfies Filter;
