/**
 * Placement rules v8's image step, kept for logs recorded under 8 and 9 (10's is `image-cost.ts`;
 * docs/placement.md, "Images"): a call that names an image
 * (`CallRequested.imageKey`, its tenant's declaration) goes to the best-ranked worker that holds
 * that image and passes every filter, ahead of the ranking's own choice: restoring a built image
 * costs a container's start, building one costs the install (seconds to minutes), which no
 * ranking term outweighs. Without such a holder the ranking's choice stands, and the cost model
 * picks its checkpoint from the call's import hints (the image's build follows there).
 */
import { imageHolders } from '../../projections/image-holdings.js';
import { isPlaceable } from '../../projections/queries.js';
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { firstFailure } from './filters/index.js';
import type { RankedCandidates } from './candidate-index.js';
import { chooseByImageCost } from './image-cost.js';
import type { Placing } from './placing.js';
import { compareWorkers } from './ranking/index.js';
import { rulesSteps } from './rules-version.js';
import type { Scan } from './scan.js';

/**
 * `scan` with the worker the call's image makes best: under rules 10 the one of lowest image cost
 * (`image-cost.ts`), under 8 and 9 the best-ranked holder. `sorted`: the candidates in rank order
 * when the scan walked the index, else null.
 */
export function preferImageHolder(
  placing: Placing,
  sorted: RankedCandidates | null,
  scan: Scan,
): Scan {
  const imageKey = placing.call.imageKey ?? null;
  if (imageKey === null) return scan;
  const steps = rulesSteps(placing.state.rulesVersion);
  if (steps.costsImages) return chooseByImageCost(placing, imageKey, sorted, scan);
  if (!steps.prefersImageHolders) return scan;
  const { state, budget, config, unreachable, explain } = placing;
  const holders = imageHolders(state.imageKeys, imageKey);
  let best: WorkerRecord | undefined;
  // A holder is a candidate that passed every filter (the scan found one only if any did).
  if (scan.best !== undefined) {
    for (const workerId of holders) {
      const worker = state.workers.get(workerId);
      if (worker === undefined || !isPlaceable(worker) || unreachable.includes(workerId)) continue;
      if (firstFailure(worker, budget, config) >= 0) continue;
      if (best === undefined || compareWorkers(worker, best, budget) < 0) best = worker;
    }
  }
  explain?.image({
    imageKey,
    holders,
    chosen: best?.workerId ?? null,
    reason:
      best !== undefined
        ? `${best.workerId} holds the image: restored there, not built`
        : holders.length === 0
          ? 'no worker holds the image: it is built where the ranking places the call'
          : 'no worker that holds the image passes the filters: it is built where the ranking places the call',
  });
  return best === undefined ? scan : { ...scan, best };
}
