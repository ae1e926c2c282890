/**
 * Rule 3 of a pinned call: the subset of a version's candidates that the key (tenant, version)
 * hashes to (`rendezvous.ts`), through the caller's cache when there is one.
 */
import type { Flavor } from '../../../events/schema.js';
import type { ClusterState } from '../../../projections/cluster-state.js';
import { rendezvousSubset } from './rendezvous.js';
import { candidateIds, type SubsetCache } from './subset-cache.js';

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
