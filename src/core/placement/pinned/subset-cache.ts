/**
 * Pinned versions' subsets, remembered per key (tenant, version, flavor) and kept up to date as
 * the fleet's membership changes (which workers are candidates, ready and with an address, of
 * which flavor). Each key keeps its best `k + SPARE` workers by rendezvous score; a worker joining
 * costs each key one hash when it next asks (inserted if it scores high enough), a worker leaving
 * is dropped from the lists that held it (a spare moves up), and only a key that runs out of
 * spares is scored again in full. Load reports change a worker's record but not its membership,
 * so they cost nothing here. Owned by the caller with the state it serves (in `PlacementCaches`),
 * fed by the same fold as the candidate index; a map it was not fed from rebuilds it. It never
 * changes an answer: without it, placement computes the same subsets.
 */
import type { CatalogueInForce } from '../../../projections/cluster-state.js';
import type { Flavor } from '../../../events/schema.js';
import type { WorkerRecord } from '../../../projections/cluster-state.js';
import { isPlaceable } from '../../../projections/queries.js';
import type { WorkerChangeSink } from '../../../projections/worker-changes.js';
import { compareScored, rankedByScore, rendezvousScore, type ScoredWorker } from './rendezvous.js';

/** Workers each key keeps beyond its k, so that a worker leaving rarely means scoring again. */
const SPARE = 2;
/** Membership changes remembered; a key older than them is scored again in full. */
const MAX_CHANGES = 4096;

/** The candidate workers of `flavor` in `workers` (ready, with an address). */
export function candidateIds(workers: Iterable<WorkerRecord>, flavor: Flavor): string[] {
  const ids: string[] = [];
  for (const worker of workers) {
    if (worker.flavor !== flavor || !isPlaceable(worker)) continue;
    ids.push(worker.workerId);
  }
  return ids;
}

interface Change {
  readonly generation: number;
  readonly workerId: string;
  readonly flavor: Flavor;
  readonly joined: boolean;
}

interface Entry {
  generation: number;
  /** How many workers `ranked` keeps at most. */
  capacity: number;
  /** The best workers of the key's flavor, best first (at most `capacity`). */
  ranked: ScoredWorker[];
  /**
   * Whether `ranked` holds every candidate of the flavor: only then may a newcomer scoring below
   * all of it be appended (otherwise an unlisted candidate may rank between them).
   */
  complete: boolean;
  /** The subset last answered and its k (so a repeated question allocates nothing). */
  ids: readonly string[];
  idsK: number;
}

/** Subsets per key, kept up to date with membership. */
export class SubsetCache implements WorkerChangeSink {
  private source: ReadonlyMap<string, WorkerRecord> | undefined;
  /** Every worker of the source: its flavor when a candidate, else null. */
  private members = new Map<string, Flavor | null>();
  private readonly changed = new Set<string>();
  /** Bumped with every membership change. */
  private generation = 0;
  /** Keys whose entry is older than this are scored again in full. */
  private oldestKnown = 0;
  private changes: Change[] = [];
  private readonly counts = new Map<Flavor, number>();
  private readonly entries = new Map<string, Entry>();
  private flavorsCatalogue: CatalogueInForce | null = null;
  private readonly versionFlavors = new Map<string, readonly string[]>();

  /** The fold changed (or added) a worker of the map the cache serves. */
  workerChanged(workerId: string): void {
    this.changed.add(workerId);
  }

  /**
   * The flavors whose catalogue lists `version`, computed by `list` once per catalogue in force
   * (a catalogue with many versions would cost a walk per call otherwise).
   */
  flavorsOf(
    catalogue: CatalogueInForce | null,
    version: string,
    list: (catalogue: CatalogueInForce | null, version: string) => string[],
  ): readonly string[] {
    if (catalogue !== this.flavorsCatalogue) {
      this.flavorsCatalogue = catalogue;
      this.versionFlavors.clear();
    }
    let flavors = this.versionFlavors.get(version);
    if (flavors === undefined) {
      flavors = list(catalogue, version);
      this.versionFlavors.set(version, flavors);
    }
    return flavors;
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
    const key = `${tenantId}\n${version}\n${flavor}`;
    let entry = this.entries.get(key);
    if (entry !== undefined && entry.generation === this.generation && entry.idsK === k) {
      return entry.ids;
    }
    if (
      entry === undefined ||
      entry.capacity < k ||
      !this.replay(entry, tenantId, version, flavor, k)
    ) {
      entry = this.scored(workers, tenantId, version, flavor, k);
      this.entries.set(key, entry);
    }
    entry.ids = entry.ranked.slice(0, k).map((scored) => scored.workerId);
    entry.idsK = k;
    return entry.ids;
  }

  /** A key scored in full over the current candidates of its flavor. */
  private scored(
    workers: ReadonlyMap<string, WorkerRecord>,
    tenantId: string,
    version: string,
    flavor: Flavor,
    k: number,
  ): Entry {
    const capacity = k + SPARE;
    const ranked = rankedByScore(tenantId, version, candidateIds(workers.values(), flavor)).slice(
      0,
      capacity,
    );
    const complete = ranked.length < capacity;
    return { generation: this.generation, capacity, ranked, complete, ids: [], idsK: -1 };
  }

  /**
   * Brings an entry up to date with the membership changes since its generation; false when it
   * cannot (too old, or too few workers left in it while more candidates exist).
   */
  private replay(
    entry: Entry,
    tenantId: string,
    version: string,
    flavor: Flavor,
    k: number,
  ): boolean {
    if (entry.generation < this.oldestKnown) return false;
    const start = this.changes.findIndex((change) => change.generation > entry.generation);
    if (start >= 0) {
      for (let i = start; i < this.changes.length; i += 1) {
        const change = this.changes[i] as Change;
        if (change.flavor !== flavor) continue;
        const at = entry.ranked.findIndex((scored) => scored.workerId === change.workerId);
        if (at >= 0) entry.ranked.splice(at, 1);
        if (!change.joined) continue;
        const scored = {
          workerId: change.workerId,
          score: rendezvousScore(tenantId, version, change.workerId),
        };
        let place = entry.ranked.length;
        while (place > 0 && compareScored(scored, entry.ranked[place - 1] as ScoredWorker) < 0) {
          place -= 1;
        }
        if (place === entry.ranked.length && !entry.complete) continue;
        if (place < entry.capacity) {
          entry.ranked.splice(place, 0, scored);
          if (entry.ranked.length > entry.capacity) {
            entry.ranked.pop();
            entry.complete = false;
          }
        } else {
          entry.complete = false;
        }
      }
    }
    entry.generation = this.generation;
    // The list is always the best of the current candidates (anyone left out ranks below all of
    // it); it answers while it still holds k of them, or all there are.
    return entry.ranked.length >= Math.min(k, this.counts.get(flavor) ?? 0);
  }

  private catchUp(workers: ReadonlyMap<string, WorkerRecord>): void {
    if (workers !== this.source || this.members.size !== workers.size) {
      this.rebuild(workers);
      return;
    }
    if (this.changed.size === 0) return;
    for (const workerId of this.changed) {
      const record = workers.get(workerId);
      const now = record !== undefined && isPlaceable(record) ? record.flavor : null;
      const before = this.members.get(workerId) ?? null;
      if (record === undefined) this.members.delete(workerId);
      else this.members.set(workerId, now);
      if (before === now) continue;
      if (before !== null) this.record(workerId, before, false);
      if (now !== null) this.record(workerId, now, true);
    }
    this.changed.clear();
  }

  private record(workerId: string, flavor: Flavor, joined: boolean): void {
    this.generation += 1;
    this.counts.set(flavor, (this.counts.get(flavor) ?? 0) + (joined ? 1 : -1));
    this.changes.push({ generation: this.generation, workerId, flavor, joined });
    if (this.changes.length > MAX_CHANGES) {
      const dropped = this.changes.splice(0, this.changes.length - MAX_CHANGES / 2);
      this.oldestKnown = (dropped.at(-1) as Change).generation;
    }
  }

  private rebuild(workers: ReadonlyMap<string, WorkerRecord>): void {
    this.source = workers;
    this.changed.clear();
    this.members = new Map();
    this.counts.clear();
    for (const [workerId, worker] of workers) {
      const flavor = isPlaceable(worker) ? worker.flavor : null;
      this.members.set(workerId, flavor);
      if (flavor !== null) this.counts.set(flavor, (this.counts.get(flavor) ?? 0) + 1);
    }
    this.generation += 1;
    this.oldestKnown = this.generation;
    this.changes = [];
    this.entries.clear();
  }
}
