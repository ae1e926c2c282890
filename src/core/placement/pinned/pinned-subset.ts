/**
 * Where a tenant's next pinned call may go: the subset of the version in force on the flavor the
 * call runs on (the same resolution, flavor and rendezvous subset as placement meets for a pinned
 * call outside any session and not a retry). What a tenant's usable slots count for pinned calls.
 * Pure.
 */
import type { ClusterState } from '../../../projections/cluster-state.js';
import type { GrpcCodeName } from '../../../shared/grpc-codes.js';
import { currentSubset } from './subset.js';
import { noPinMessage } from './resolution.js';
import { versionFlavor } from './version-flavor.js';

/** The subset a tenant's pinned call meets now, or why it has none. */
export type PinnedSubset =
  | { readonly ok: true; readonly version: string; readonly workerIds: readonly string[] }
  | { readonly ok: false; readonly code: GrpcCodeName; readonly message: string };

/** The subset of `tenantId`'s version in force, for a GPU call when `gpuCall`. */
export function pinnedSubset(
  state: ClusterState,
  tenantId: string,
  gpuCall: boolean,
): PinnedSubset {
  const entry = state.routing.entries.get(tenantId);
  if (entry === undefined) {
    return {
      ok: false,
      code: 'FAILED_PRECONDITION',
      message: noPinMessage(tenantId),
    };
  }
  const flavor = versionFlavor(state.catalogue, entry.version, gpuCall);
  if (!flavor.ok) return { ok: false, code: 'FAILED_PRECONDITION', message: flavor.message };
  const workerIds = currentSubset(state, tenantId, entry.version, flavor.flavor, entry.k);
  return { ok: true, version: entry.version, workerIds };
}
