/**
 * Pinned versions' subsets, remembered per key (tenant, version, flavor, k) and recomputed only
 * when the fleet's membership changes: which workers are candidates (ready, with an address) of
 * which flavor. Load reports change a worker's record but not its membership, so they cost a
 * lookup, not a rehash. Owned by the caller with the state it serves (in `PlacementCaches`),
 * fed by the same fold as the candidate index; a map it was not fed from rebuilds it. It never
 * changes an answer: without it, placement computes the same subsets.
 */
import type { Flavor } from '../../events/schema.js';
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import type { WorkerChangeSink } from '../../projections/worker-changes.js';
import { rendezvousSubset } from './rendezvous.js';

interface CachedSubset {
  readonly generation: number;
  readonly workerIds: readonly string[];
}

/** The candidate workers of `flavor` in `workers` (ready, with an address). */
export function candidateIds(
  workers: Iterable<WorkerRecord>,
  flavor: Flavor,
  excluded?: ReadonlySet<string>,
): string[] {
  const ids: string[] = [];
  for (const worker of workers) {
    if (worker.flavor !== flavor || !isPlaceable(worker)) continue;
    if (excluded?.has(worker.workerId) === true) continue;
    ids.push(worker.workerId);
  }
  return ids;
}

/** Subsets per key, kept until membership changes. */
export class SubsetCache implements WorkerChangeSink {
  private source: ReadonlyMap<string, WorkerRecord> | undefined;
  /** Every worker of the source: its flavor when a candidate, else null. */
  private members = new Map<string, Flavor | null>();
  private readonly changed = new Set<string>();
  /** Bumped whenever a worker becomes or stops being a candidate (or changes flavor). */
  private generation = 0;
  private readonly subsets = new Map<string, CachedSubset>();
  /** Candidate IDs per flavor, for the current generation. */
  private readonly byFlavor = new Map<Flavor, readonly string[]>();

  /** The fold changed (or added) a worker of the map the cache serves. */
  workerChanged(workerId: string): void {
    this.changed.add(workerId);
  }

  /** The subset of the key among the candidates of `flavor` in `workers`, best first. */
  subset(
    workers: ReadonlyMap<string, WorkerRecord>,
    tenantId: string,
    version: string,
    flavor: Flavor,
    k: number,
  ): readonly string[] {
    this.catchUp(workers);
    const key = `${tenantId}\n${version}\n${flavor}\n${k}`;
    const cached = this.subsets.get(key);
    if (cached !== undefined && cached.generation === this.generation) return cached.workerIds;
    const workerIds = rendezvousSubset(tenantId, version, this.candidates(workers, flavor), k);
    this.subsets.set(key, { generation: this.generation, workerIds });
    return workerIds;
  }

  private candidates(
    workers: ReadonlyMap<string, WorkerRecord>,
    flavor: Flavor,
  ): readonly string[] {
    let ids = this.byFlavor.get(flavor);
    if (ids === undefined) {
      ids = candidateIds(workers.values(), flavor);
      this.byFlavor.set(flavor, ids);
    }
    return ids;
  }

  private catchUp(workers: ReadonlyMap<string, WorkerRecord>): void {
    if (workers !== this.source || this.members.size !== workers.size) {
      this.rebuild(workers);
      return;
    }
    if (this.changed.size === 0) return;
    let moved = false;
    for (const workerId of this.changed) {
      const record = workers.get(workerId);
      const now = record !== undefined && isPlaceable(record) ? record.flavor : null;
      if ((this.members.get(workerId) ?? null) !== now) moved = true;
      if (record === undefined) this.members.delete(workerId);
      else this.members.set(workerId, now);
    }
    this.changed.clear();
    if (moved) this.bump();
  }

  private rebuild(workers: ReadonlyMap<string, WorkerRecord>): void {
    this.source = workers;
    this.changed.clear();
    this.members = new Map();
    for (const [workerId, worker] of workers) {
      this.members.set(workerId, isPlaceable(worker) ? worker.flavor : null);
    }
    this.bump();
  }

  private bump(): void {
    this.generation += 1;
    this.byFlavor.clear();
    // Old keys would only be recomputed on use; dropping them keeps the cache to live keys.
    this.subsets.clear();
  }
}
