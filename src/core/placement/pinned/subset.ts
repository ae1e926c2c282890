/**
 * Rule 3 of a pinned call: its candidates are the subset of the version's flavor's candidates
 * that the key (tenant, version) hashes to (`rendezvous.ts`), through the caller's cache when
 * there is one.
 */
import type { Flavor } from '../../../events/schema.js';
import type { ClusterState } from '../../../projections/cluster-state.js';
import type { Placing } from '../placing.js';
import { rendezvousSubset } from './rendezvous.js';
import type { Resolution } from './resolution.js';
import { candidateIds, type SubsetCache } from './subset-cache.js';
import { flavorsListing, versionFlavor } from './version-flavor.js';

/** The subset of (tenant, version, k) on `flavor` now, through the cache when there is one. */
export function currentSubset(
  state: ClusterState,
  tenantId: string,
  version: string,
  flavor: Flavor,
  k: number,
  subsets?: SubsetCache,
): readonly string[] {
  if (subsets) return subsets.subset(state.workers, tenantId, version, flavor, k);
  return rendezvousSubset(tenantId, version, candidateIds(state.workers.values(), flavor), k);
}

/** Rule 3's candidates of a pinned call: the version's flavor and the subset of its candidates. */
export interface VersionCandidates {
  readonly flavor: Flavor;
  /** The subset, best score first; empty when the flavor has no candidate at all. */
  readonly subset: readonly string[];
}

/**
 * The candidates of a pinned call resolved to `resolution`: the subset of k among the workers of
 * the version's flavor, or why the version runs on no flavor the call can use.
 */
export function versionCandidates(
  placing: Placing,
  resolution: Resolution,
): VersionCandidates | { readonly message: string } {
  const { state, caches } = placing;
  const { tenantId, version, k } = resolution;
  const subsets = caches?.subsets;
  const flavor = versionFlavor(
    state.catalogue,
    version,
    placing.budget.gpuCall,
    subsets?.flavorsOf(state.catalogue, version, flavorsListing),
  );
  if (!flavor.ok) return { message: flavor.message };
  // An empty subset means no candidate at all (k >= 1).
  return {
    flavor: flavor.flavor,
    subset: currentSubset(state, tenantId, version, flavor.flavor, k, subsets),
  };
}
