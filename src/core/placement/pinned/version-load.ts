/**
 * Rules 5 to 7 of a pinned call on its subset (docs/tenant-routing.md): a holder takes the call
 * warm; else the best member that passes the filters loads the version first (a cold load), one
 * load in flight per worker, and none the caller's deadline would not wait for (rules 6 on); a call
 * that can go nowhere now is shed with a retry-after hint, or from rules 9 on waits in the
 * admission queue when it is in force. Never another version.
 */
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import type { PlacementDecision } from '../decision.js';
import { reserve } from '../outcome.js';
import type { Placing } from '../placing.js';
import type { SubsetScan } from './holders.js';
import type { Resolution } from './resolution.js';
import { explainRouting, routingCandidates } from './explain-routing.js';
import { refuseVersion, shed } from './version-refusal.js';
import { lateLoad, lateLoadReason } from './load-deadline.js';
import { neverFits } from '../never-fits.js';
import { rulesSteps } from '../rules-version.js';

/**
 * No subset member can take the call: no candidate at all (refused), or none this call can use
 * now (shed): all unreachable for it, all ruled out by the filters, or the one to load the
 * version loading another already.
 */
export function noMember(
  placing: Placing,
  resolution: Resolution,
  scan: SubsetScan,
): PlacementDecision {
  const { version } = resolution;
  const { flavor, subset } = scan;
  if (scan.candidates === 0) {
    return refuseVersion(
      placing,
      resolution,
      'UNAVAILABLE',
      `no ${flavor} worker is available for version "${version}"`,
    );
  }
  if (scan.reachable === 0) {
    const why = placing.dialError === undefined ? '' : ` (${placing.dialError})`;
    return shed(
      placing,
      resolution,
      `the router could not reach ${subset.join(', ')}, version "${version}"'s subset, for this call${why}, and a pinned call goes nowhere else`,
      flavor,
      subset,
    );
  }
  if (scan.loader !== undefined) {
    return shed(
      placing,
      resolution,
      `version "${version}" is not resident on its subset and ${scan.loader.workerId}, the subset member to load it, is loading a version already (one cold load at a time per worker)`,
      flavor,
      subset,
    );
  }
  const cut = subset.filter((workerId) => placing.unreachable.includes(workerId));
  const ruledOut =
    cut.length === 0
      ? 'its filters ruled them all out'
      : `unreachable for this call: ${cut.join(', ')}; the filters ruled out the rest`;
  const why = `no worker of version "${version}"'s subset (${subset.join(', ')}) can take the call now (${ruledOut})`;
  if (!rulesSteps(placing.state.rulesVersion).queuesPinnedCalls) {
    return shed(placing, resolution, why, flavor, subset);
  }
  return notNow(placing, resolution, why, scan);
}

/**
 * Rules 9: no subset member can take the call now. One that no member could take even empty is
 * refused as never fitting (final); else the shed is marked "not now", so that with the queue in
 * force the call waits in it (in `why`'s words) instead, on its subset only.
 */
function notNow(
  placing: Placing,
  resolution: Resolution,
  why: string,
  scan: SubsetScan,
): PlacementDecision {
  const { state, budget, config, unreachable } = placing;
  const members: WorkerRecord[] = [];
  for (const workerId of scan.subset) {
    const worker = state.workers.get(workerId);
    if (worker !== undefined) members.push(worker);
  }
  const never = neverFits(members, budget, config, unreachable);
  if (never !== null) {
    return { ...refuseVersion(placing, resolution, 'RESOURCE_EXHAUSTED', never), fit: 'never' };
  }
  const shedding = shed(placing, resolution, why, scan.flavor, scan.subset);
  return { ...shedding, fit: 'not-now', waitsWith: why };
}

/**
 * The call on `worker`: warm on a holder, else it loads the version first (a cold load), unless
 * the load would not finish inside the caller's deadline (shed: `load-deadline.ts`).
 */
export function loadVersion(
  placing: Placing,
  resolution: Resolution,
  scan: SubsetScan,
  worker: WorkerRecord,
): PlacementDecision {
  const { version } = resolution;
  const { flavor, subset } = scan;
  const warm = worker === scan.holder;
  const late = warm ? null : lateLoad(placing, version, flavor, worker.workerId);
  if (late !== null) {
    const why = lateLoadReason(version, worker.workerId, late);
    // Not loaded for this call; loaded all the same for the calls that follow (a pre-warm).
    const prewarm = { workerId: worker.workerId, version };
    return { ...shed(placing, resolution, why, flavor, subset), prewarm };
  }
  if (placing.explain !== undefined) {
    const verdict = warm
      ? `placed on ${worker.workerId}: it holds version "${version}" and ranks first among the subset's holders`
      : `cold load on ${worker.workerId}: no subset member holds version "${version}"; ${worker.workerId} ranks first among those that pass the filters and has no cold load in flight`;
    const candidates = routingCandidates(placing, resolution, flavor, subset);
    explainRouting(placing, resolution, verdict, flavor, candidates);
  }
  return reserve(
    placing,
    worker,
    { containerId: null, checkpointId: version },
    { version, routingRevision: resolution.revision, coldLoad: !warm },
  );
}
