/**
 * Recording a pinned call's routing while it is placed (only when an explanation is asked for):
 * the resolution, the verdict, and every candidate of the version's flavor with its score, its
 * place in the subset, what it holds and loads, and the first filter it fails.
 */
import type { Flavor } from '../../../events/schema.js';
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import { holdsVersion } from '../../../projections/routing-state.js';
import { Verdict } from '../filter.js';
import { explainFilters } from '../filters/index.js';
import type { Placing } from '../placing.js';
import { rankedByScore } from './rendezvous.js';
import type { Resolution } from './resolution.js';
import { describeResolution, type RoutingCandidate } from './routing-explanation.js';
import { candidateIds } from './subset-cache.js';

/**
 * Records a pinned call's routing in the explanation being built, if one is: its resolution (null
 * before one was made), the verdict, and the flavor and candidates once known.
 */
export function explainRouting(
  placing: Placing,
  resolution: Resolution | null,
  verdict: string,
  flavor: string | null = null,
  candidates: readonly RoutingCandidate[] = [],
): void {
  placing.explain?.routing({
    tenantId: placing.tenantId,
    resolution,
    resolved: resolution === null ? null : describeResolution(resolution),
    flavor,
    candidates,
    verdict,
  });
}

/** Every candidate of the version's flavor for the explanation, best score first. */
export function routingCandidates(
  placing: Placing,
  resolution: Resolution,
  flavor: Flavor,
  subset: readonly string[],
): RoutingCandidate[] {
  const { state, budget, config, unreachable } = placing;
  const ids = candidateIds(state.workers.values(), flavor);
  return rankedByScore(resolution.tenantId, resolution.version, ids).map(({ workerId, score }) => {
    const worker = state.workers.get(workerId) as WorkerRecord;
    const part = state.routing.workers.get(workerId);
    const rank = subset.indexOf(workerId);
    const cut = unreachable.includes(workerId);
    const failed =
      rank < 0 || cut
        ? undefined
        : explainFilters(worker, budget, config).find(({ verdict }) => verdict === Verdict.fail);
    return {
      workerId,
      score: score.toString(),
      subsetRank: rank < 0 ? null : rank + 1,
      residency: part?.versions.get(resolution.version)?.state ?? null,
      holds: holdsVersion(state.routing, workerId, resolution.version),
      loading: part?.loads[0]?.checkpointId ?? null,
      unreachable: cut,
      failedFilter:
        failed === undefined ? null : { filter: failed.filter.name, reason: failed.reason },
    };
  });
}
