/** A GPU call needs a `gpu` worker; CPU calls pass every worker. */
import type { Filter } from '../filter.js';
import { Verdict } from '../filter.js';

export const name = 'flavor';
export const summary = 'a GPU call needs a gpu worker; CPU calls pass every worker';

export const flavor = {
  name,
  summary,
  check: (worker, budget, _config, status?) => {
    if (!budget.gpuCall) {
      if (status) status.reason = `cpu call: any flavor will do (worker is ${worker.flavor})`;
      return Verdict.skip;
    }
    const verdict = worker.flavor === 'gpu' ? Verdict.pass : Verdict.fail;
    if (status) {
      status.reason =
        verdict === Verdict.pass
          ? 'gpu call on a gpu worker'
          : `gpu call needs a gpu worker; this one is ${worker.flavor}`;
    }
    return verdict;
  },
} satisfies Filter;
