/**
 * Which versions a load must evict to stay within the worker's resident budget: the least
 * recently used among those the router did not tell the worker to keep, that no running call
 * uses and that are not loading, until the new version fits. Pure.
 */
import { formatSize } from '../../../shared/units.js';

/** A version held (or loading) on this worker, as the plan sees it. */
export interface HeldVersion {
  readonly checkpointId: string;
  /** What keeping it resident costs (the catalogue's `residentMemory`), in bytes. */
  readonly bytes: number;
  /** When a call last used it (or it was loaded), epoch ms. */
  readonly lastUsed: number;
  /** The router told the worker to keep it. */
  readonly protected: boolean;
  /** A running call uses it. */
  readonly inUse: boolean;
  readonly loading: boolean;
}

/** What a load must do first, or why it cannot happen. */
export type EvictionPlan =
  | { readonly ok: true; readonly evict: readonly string[] }
  | { readonly ok: false; readonly problem: string };

/**
 * The plan for loading `checkpointId` (`bytes`) with `held` resident or loading, under `budget`
 * bytes (null: no budget).
 */
export function planLoad(
  budget: number | null,
  checkpointId: string,
  bytes: number,
  held: readonly HeldVersion[],
): EvictionPlan {
  const others = held.filter((version) => version.checkpointId !== checkpointId);
  const used = others.reduce((sum, version) => sum + version.bytes, 0);
  if (budget === null || used + bytes <= budget) return { ok: true, evict: [] };
  if (bytes > budget) {
    return {
      ok: false,
      problem: `it needs ${formatSize(bytes)} resident, more than this worker's whole resident budget of ${formatSize(budget)} (--resident-memory)`,
    };
  }
  const candidates = others
    .filter(
      (version) => !version.protected && !version.inUse && !version.loading && version.bytes > 0,
    )
    .sort((a, b) => a.lastUsed - b.lastUsed || (a.checkpointId < b.checkpointId ? -1 : 1));
  const evict: string[] = [];
  let after = used;
  for (const candidate of candidates) {
    if (after + bytes <= budget) break;
    evict.push(candidate.checkpointId);
    after -= candidate.bytes;
  }
  if (after + bytes <= budget) return { ok: true, evict };
  const kept = others
    .filter((version) => version.protected || version.inUse || version.loading)
    .map(
      (version) =>
        `${version.checkpointId} (${version.protected ? 'protected' : version.inUse ? 'in use' : 'loading'})`,
    );
  return {
    ok: false,
    problem: `the resident budget of ${formatSize(budget)} is full: ${formatSize(used)} is held by versions that cannot be evicted (${kept.join(', ') || 'none'}) and it needs ${formatSize(bytes)}`,
  };
}
