/**
 * Which versions the router keeps where: every pinned version on its subset, a staged version on
 * its subset (and the workers asked to pre-warm it), and a version inside `PIN_RETENTION` after
 * it stopped being pinned on its subset. These are the sets the router tells each worker to keep
 * (`ResidencyProtected`), and what the fleet's resident budget is measured against.
 */
import type { ClusterState } from '../../projections/cluster-state.js';
import { compareText } from '../../projections/queries.js';
import type { RoutingState } from '../../projections/routing-state.js';
import { currentSubset } from '../placement/pinned/subset.js';
import type { SubsetCache } from '../placement/pinned/subset-cache.js';
import { flavorsListing } from '../placement/pinned/version-flavor.js';

/** Why a version is kept. */
export type KeptReason = 'pinned' | 'staged' | 'retained';

/** A version the router keeps for a tenant, on the subset (tenant, version, k). */
export interface KeptVersion {
  readonly tenantId: string;
  readonly version: string;
  readonly k: number;
  readonly reason: KeptReason;
  /** Workers to keep it on besides the subset (a staged pin's pre-warm targets). */
  readonly alsoOn: readonly string[];
}

/** Every version the routing state keeps at `now` (epoch ms), pinned first, then staged, retained. */
export function keptVersions(
  routing: RoutingState,
  now: number,
  retentionMs: number,
): KeptVersion[] {
  const kept: KeptVersion[] = [];
  for (const entry of routing.entries.values()) {
    kept.push({ ...pick(entry), reason: 'pinned', alsoOn: [] });
  }
  for (const staged of routing.staged.values()) {
    kept.push({ ...pick(staged), reason: 'staged', alsoOn: staged.targetWorkers });
  }
  for (const retained of routing.retained.values()) {
    if (Date.parse(retained.since) + retentionMs > now) {
      kept.push({ ...pick(retained), reason: 'retained', alsoOn: [] });
    }
  }
  return kept;
}

function pick(entry: { tenantId: string; version: string; k: number }) {
  return { tenantId: entry.tenantId, version: entry.version, k: entry.k };
}

/** The workers a kept version lives on: its subset on every flavor that lists it, and `alsoOn`. */
export function keptOn(state: ClusterState, kept: KeptVersion, subsets?: SubsetCache): string[] {
  const workers = new Set<string>(kept.alsoOn);
  for (const flavor of flavorsListing(state.catalogue, kept.version)) {
    if (flavor !== 'cpu' && flavor !== 'gpu') continue;
    for (const workerId of currentSubset(
      state,
      kept.tenantId,
      kept.version,
      flavor,
      kept.k,
      subsets,
    )) {
      workers.add(workerId);
    }
  }
  return [...workers];
}

/** Per worker, the versions to keep there, sorted; every worker of `state` has an entry. */
export function protectedSets(
  state: ClusterState,
  kept: readonly KeptVersion[],
  subsets?: SubsetCache,
): Map<string, string[]> {
  const sets = new Map<string, Set<string>>();
  for (const workerId of state.workers.keys()) sets.set(workerId, new Set());
  for (const version of kept) {
    for (const workerId of keptOn(state, version, subsets))
      sets.get(workerId)?.add(version.version);
  }
  return new Map([...sets].map(([workerId, ids]) => [workerId, [...ids].sort(compareText)]));
}
