/**
 * Rules 3 and 4 of a pinned call, over its subset (docs/tenant-routing.md): the seed filters, then
 * the seed ranking key, twice: among the members that hold the version (a holder takes the call
 * warm) and among all that pass (the one that would cold-load it, unless it is loading a version
 * already: one cold load per worker). Members an earlier attempt of the call could not reach are
 * left out.
 */
import { hasColdLoadInFlight, holdsVersion } from '../../../projections/routing-state.js';
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import { FILTERS, firstFailure } from '../filters/index.js';
import type { Placing } from '../placing.js';
import { compareWorkers } from '../ranking/index.js';
import type { Scan } from '../scan.js';
import type { VersionCandidates } from './subset.js';

/** What the filters and the ranking made of the subset. */
export interface SubsetScan extends Scan, VersionCandidates {
  /** The best member that holds the version, if any passes. */
  readonly holder: WorkerRecord | undefined;
  /** The best member that passes, holder or not: the one that would load the version. */
  readonly loader: WorkerRecord | undefined;
  /** Whether that member has a cold load in flight already (so it loads nothing more now). */
  readonly loaderBusy: boolean;
  /** Members this call may still be sent to (not unreachable for it). */
  readonly reachable: number;
}

/** The subset's holders and loader for a call of `version`. */
export function scanSubset(
  placing: Placing,
  version: string,
  candidates: VersionCandidates,
): SubsetScan {
  const { state, budget, config, unreachable } = placing;
  const failures = new Array<number>(FILTERS.length).fill(0);
  let holder: WorkerRecord | undefined;
  let loader: WorkerRecord | undefined;
  let reachable = 0;
  for (const workerId of candidates.subset) {
    if (unreachable.includes(workerId)) continue;
    reachable += 1;
    const worker = state.workers.get(workerId) as WorkerRecord;
    const failed = firstFailure(worker, budget, config);
    if (failed >= 0) {
      failures[failed] = (failures[failed] as number) + 1;
      continue;
    }
    if (loader === undefined || compareWorkers(worker, loader, budget) < 0) loader = worker;
    if (!holdsVersion(state.routing, workerId, version)) continue;
    if (holder === undefined || compareWorkers(worker, holder, budget) < 0) holder = worker;
  }
  const loaderBusy = loader !== undefined && hasColdLoadInFlight(state.routing, loader.workerId);
  return {
    flavor: candidates.flavor,
    subset: candidates.subset,
    // A holder takes the call warm; else the loader, if it may load the version now.
    best: holder ?? (loaderBusy ? undefined : loader),
    candidates: candidates.subset.length,
    failures,
    holder,
    loader,
    loaderBusy,
    reachable,
  };
}
