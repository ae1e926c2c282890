/**
 * Placement of a pinned call (`demand.pinned`), in the order of docs/tenant-routing.md: the
 * tenant and the demand, session affinity, one resolution, the version's flavor, the rendezvous
 * subset of k, holders first by the seed ranking key, at most one cold load in flight per worker,
 * a shed with a retry-after hint otherwise. Never another version. Pure; `explainPlacement` runs
 * the same steps with an explanation builder.
 */
import type { NewEvent } from '../../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../../projections/cluster-state.js';
import { hasColdLoadInFlight, holdsVersion } from '../../../projections/routing-state.js';
import type { Config } from '../../../shared/config.js';
import type { GrpcCodeName } from '../../../shared/grpc-codes.js';
import { formatDuration } from '../../../shared/units.js';
import { sessionIdOf, type Budget, type CallToPlace } from '../call.js';
import type { PlacementDecision } from '../decision.js';
import type { ExplanationBuilder } from '../explanation.js';
import { Verdict } from '../filter.js';
import { explainFilters, firstFailure } from '../filters/index.js';
import { rejected, reserve, type RejectionRouting } from '../outcome.js';
import type { PackageRequirement } from '../packages.js';
import { compareWorkers } from '../ranking/index.js';
import { sessionAffinity } from '../session-affinity.js';
import { rankedByScore, rendezvousSubset } from './rendezvous.js';
import { resolvePinned, type Resolution } from './resolution.js';
import { retryProblem } from '../retry-check.js';
import type { RoutingCandidate } from './routing-explanation.js';
import { candidateIds, type SubsetCache } from './subset-cache.js';
import { flavorsListing, versionFlavor } from './version-flavor.js';

/** What a pinned call's placement is given besides the state and the call. */
export interface PinnedContext {
  readonly config: Config;
  readonly budget: Budget;
  readonly requirements: readonly PackageRequirement[];
  /** The caller's subset cache for this state, if any (it never changes an answer). */
  readonly subsets?: SubsetCache | undefined;
  /**
   * Workers earlier attempts of the call could not reach (a re-placement after a failed dial):
   * they stay in the subset's hashing, so the subset is the one the resolution always meets, but
   * the call goes only to its other members.
   */
  readonly unreachable?: readonly string[] | undefined;
  /** Why the last of them could not be reached, for the shed's message. */
  readonly dialError?: string | undefined;
  readonly explain?: ExplanationBuilder | undefined;
}

/** A resolution in words, as explanations print it. */
export function describeResolution(resolution: Resolution): string {
  const entry = `version "${resolution.version}", k ${resolution.k}, revision ${resolution.revision}`;
  switch (resolution.source) {
    case 'table':
      return `tenant ${resolution.tenantId}'s entry in force: ${entry}`;
    case 'retry':
      return `the resolution of the retried call ${resolution.from ?? ''}: ${entry}`;
    case 'session':
      return `the resolution of session ${resolution.from ?? ''} (its first placed call): ${entry}`;
    case 'placed':
      return `the resolution of this call's first placement (placed again after a failed dial): ${entry}`;
  }
}

/** Records the routing explanation, when one is asked for. */
function explainRouting(
  context: PinnedContext,
  tenantId: string | null,
  resolution: Resolution | null,
  verdict: string,
  flavor: string | null = null,
  candidates: readonly RoutingCandidate[] = [],
): void {
  context.explain?.routing({
    tenantId,
    resolution,
    resolved: resolution === null ? null : describeResolution(resolution),
    flavor,
    candidates,
    verdict,
  });
}

/** A refusal before or after resolving (with the resolution and a shed's hint when given). */
function refusal(
  call: CallToPlace,
  context: PinnedContext,
  before: readonly NewEvent[],
  resolution: Resolution | null,
  code: GrpcCodeName,
  message: string,
  retryAfterMs: number | null = null,
  flavor: string | null = null,
  candidates: readonly RoutingCandidate[] = [],
): PlacementDecision {
  const tenantId = call.tenantId ?? null;
  explainRouting(
    context,
    tenantId,
    resolution,
    `${retryAfterMs === null ? 'refused' : 'shed'}: ${message}`,
    flavor,
    candidates,
  );
  const routing: RejectionRouting =
    resolution === null
      ? { version: null, routingRevision: null, retryAfterMs: null }
      : { version: resolution.version, routingRevision: resolution.revision, retryAfterMs };
  return rejected(call, before, code, message, routing);
}

/** Decides a pinned call (docs/tenant-routing.md). */
export function decidePinned(
  state: ClusterState,
  call: CallToPlace,
  context: PinnedContext,
): PlacementDecision {
  const tenantId = call.tenantId ?? null;
  const none: readonly NewEvent[] = [];
  if (tenantId === null) {
    return refusal(
      call,
      context,
      none,
      null,
      'FAILED_PRECONDITION',
      "a pinned call needs a tenant, and this call's credential names none (use a tenant's client token)",
    );
  }
  if (call.demand.disableOptimizedExecution === true) {
    return refusal(
      call,
      context,
      none,
      null,
      'INVALID_ARGUMENT',
      'a pinned call runs on its version, a checkpoint: disable_optimized_execution contradicts pinned',
    );
  }
  const retry = retryProblem(state, call);
  if (retry !== null) return refusal(call, context, none, null, 'PERMISSION_DENIED', retry);

  // 1. Session affinity first (a session's container already holds its version).
  const sessionId = sessionIdOf(call.sessionId);
  const before: NewEvent[] = [];
  const unreachable = context.unreachable ?? [];
  const affinity =
    sessionId === null
      ? null
      : sessionAffinity(state, sessionId, call.demand, unreachable, tenantId);
  if (affinity !== null && sessionId !== null) {
    context.explain?.session(
      sessionId,
      affinity.kind === 'reject' ? affinity.message : affinity.verdict,
    );
    if (affinity.kind === 'reject') {
      if (affinity.foreign !== undefined) {
        explainRouting(context, tenantId, null, `refused: ${affinity.message}`);
        return rejected(call, none, affinity.code, affinity.message, undefined, affinity.foreign);
      }
      return refusal(call, context, none, null, affinity.code, affinity.message);
    }
    if (affinity.kind === 'drop-pin') {
      before.push({ type: 'SessionUnpinned', sessionId, reason: 'container_unavailable' });
    }
  }

  // 2. Resolve once.
  const resolved = resolvePinned(state, call, tenantId, unreachable.length > 0);
  if (!resolved.ok) return refusal(call, context, before, null, resolved.code, resolved.message);
  const { resolution } = resolved;
  const { version } = resolution;
  const named = call.demand.checkpointId ?? '';
  if (named !== '' && named !== version) {
    return refusal(
      call,
      context,
      before,
      resolution,
      'FAILED_PRECONDITION',
      `the call names checkpoint "${named}" but tenant ${tenantId}'s pinned version is "${version}": a pinned call is only ever served by its version`,
    );
  }
  if (affinity?.kind === 'reuse') {
    if (affinity.pin.checkpointId !== version) {
      return refusal(
        call,
        context,
        before,
        resolution,
        'FAILED_PRECONDITION',
        `session ${sessionId ?? ''} runs in a container of ${affinity.pin.checkpointId === null ? 'a cold start' : `checkpoint "${affinity.pin.checkpointId}"`}, not version "${version}": start a new session for pinned calls`,
      );
    }
    explainRouting(
      context,
      tenantId,
      resolution,
      `reuses the session's container ${affinity.pin.workerId}/${affinity.pin.containerId}, which holds version "${version}"`,
    );
    return reserve(
      call,
      before,
      context.budget,
      affinity.worker,
      context.requirements,
      state,
      { containerId: affinity.pin.containerId, checkpointId: version },
      context.explain,
      { version, routingRevision: resolution.revision, coldLoad: false },
    );
  }

  // The version's flavor.
  const flavor = versionFlavor(
    state.catalogue,
    version,
    context.budget.gpuCall,
    context.subsets?.flavorsOf(state.catalogue, version, flavorsListing),
  );
  if (!flavor.ok) {
    return refusal(call, context, before, resolution, 'FAILED_PRECONDITION', flavor.message);
  }

  // 3. The subset.
  const { subset, candidates } = subsetOf(state, resolution, flavor.flavor, context);
  if (candidates === 0) {
    return refusal(
      call,
      context,
      before,
      resolution,
      'UNAVAILABLE',
      `no ${flavor.flavor} worker is available for version "${version}"`,
    );
  }

  // 4. Holders first; 5. else the best member that passes the filters, one cold load at a time.
  const { budget, config } = context;
  let holder: WorkerRecord | undefined;
  let loader: WorkerRecord | undefined;
  for (const workerId of subset) {
    if (unreachable.includes(workerId)) continue;
    const worker = state.workers.get(workerId) as WorkerRecord;
    if (firstFailure(worker, budget, config) >= 0) continue;
    if (loader === undefined || compareWorkers(worker, loader, budget) < 0) loader = worker;
    if (!holdsVersion(state.routing, workerId, version)) continue;
    if (holder === undefined || compareWorkers(worker, holder, budget) < 0) holder = worker;
  }
  const explaining = context.explain !== undefined;
  const all = () =>
    explaining ? routingCandidates(state, resolution, flavor.flavor, subset, context) : [];
  const routing = { version, routingRevision: resolution.revision };
  if (holder !== undefined) {
    if (explaining) {
      explainRouting(
        context,
        tenantId,
        resolution,
        `placed on ${holder.workerId}: it holds version "${version}" and ranks first among the subset's holders`,
        flavor.flavor,
        all(),
      );
    }
    return reserve(
      call,
      before,
      budget,
      holder,
      context.requirements,
      state,
      { containerId: null, checkpointId: version },
      context.explain,
      { ...routing, coldLoad: false },
    );
  }
  const retryAfter = config.ROUTING_RETRY_AFTER;
  const retryWords = `retry in ${formatDuration(retryAfter)} (ROUTING_RETRY_AFTER)`;
  const reachable = subset.filter((workerId) => !unreachable.includes(workerId));
  if (reachable.length === 0) {
    const why = context.dialError === undefined ? '' : ` (${context.dialError})`;
    return refusal(
      call,
      context,
      before,
      resolution,
      'RESOURCE_EXHAUSTED',
      `the router could not reach ${subset.join(', ')}, version "${version}"'s subset, for this call${why}, and a pinned call goes nowhere else: ${retryWords}`,
      retryAfter,
      flavor.flavor,
      all(),
    );
  }
  if (loader === undefined) {
    return refusal(
      call,
      context,
      before,
      resolution,
      'RESOURCE_EXHAUSTED',
      `no worker of version "${version}"'s subset (${subset.join(', ')}) can take the call now (${reachable.length === subset.length ? 'its filters ruled them all out' : `unreachable for this call: ${subset.filter((id) => !reachable.includes(id)).join(', ')}; the filters ruled out the rest`}): ${retryWords}`,
      retryAfter,
      flavor.flavor,
      all(),
    );
  }
  if (hasColdLoadInFlight(state.routing, loader.workerId)) {
    return refusal(
      call,
      context,
      before,
      resolution,
      'RESOURCE_EXHAUSTED',
      `version "${version}" is not resident on its subset and ${loader.workerId}, the subset member to load it, is loading a version already (one cold load at a time per worker): ${retryWords}`,
      retryAfter,
      flavor.flavor,
      all(),
    );
  }
  if (explaining) {
    explainRouting(
      context,
      tenantId,
      resolution,
      `cold load on ${loader.workerId}: no subset member holds version "${version}"; ${loader.workerId} ranks first among those that pass the filters and has no cold load in flight`,
      flavor.flavor,
      all(),
    );
  }
  return reserve(
    call,
    before,
    budget,
    loader,
    context.requirements,
    state,
    { containerId: null, checkpointId: version },
    context.explain,
    { ...routing, coldLoad: true },
  );
}

/** The resolution's subset among the candidates of `flavor`, and how many candidates there are. */
function subsetOf(
  state: ClusterState,
  resolution: Resolution,
  flavor: 'cpu' | 'gpu',
  context: PinnedContext,
): { subset: readonly string[]; candidates: number } {
  const { tenantId, version, k } = resolution;
  if (context.subsets !== undefined) {
    const subset = context.subsets.subset(state.workers, tenantId, version, flavor, k);
    // An empty subset means no candidate at all (k >= 1).
    return { subset, candidates: subset.length };
  }
  const ids = candidateIds(state.workers.values(), flavor);
  return { subset: rendezvousSubset(tenantId, version, ids, k), candidates: ids.length };
}

/** Every candidate of the flavor for the explanation, best score first. */
function routingCandidates(
  state: ClusterState,
  resolution: Resolution,
  flavor: 'cpu' | 'gpu',
  subset: readonly string[],
  context: PinnedContext,
): RoutingCandidate[] {
  const ids = candidateIds(state.workers.values(), flavor);
  const unreachable = context.unreachable ?? [];
  return rankedByScore(resolution.tenantId, resolution.version, ids).map(({ workerId, score }) => {
    const worker = state.workers.get(workerId) as WorkerRecord;
    const part = state.routing.workers.get(workerId);
    const rank = subset.indexOf(workerId);
    const cut = unreachable.includes(workerId);
    const failed =
      rank < 0 || cut
        ? undefined
        : explainFilters(worker, context.budget, context.config).find(
            ({ verdict }) => verdict === Verdict.fail,
          );
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
