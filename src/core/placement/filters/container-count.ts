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

/** The words of a verdict, from the values the check computed. */
function words(
  passed: boolean,
  inFlight: number,
  idle: number,
  seen: number,
  counted: number,
  max: number,
): string {
  let terms = `${inFlight} in flight + ${idle} idle = ${seen}`;
  if (counted > seen) terms += `; by the worker's own count ${counted}`;
  return passed ? `${terms} < max ${max}` : `${terms}, not below max ${max}`;
}

export const containerCount = {
  name,
  summary,
  check: (worker, _budget, _config, status?) => {
    const max = worker.maxContainers;
    if (max === null || max <= 0) {
      if (status) status.reason = 'skipped: the worker reported no container limit';
      return Verdict.skip;
    }
    const counted = slotsCounted(worker);
    const passed = counted < max;
    if (status) {
      status.reason = words(
        passed,
        worker.inFlight,
        worker.idleContainers,
        slotsSeen(worker),
        counted,
        max,
      );
    }
    return passed ? Verdict.pass : Verdict.fail;
  },
} satisfies Filter;
