/**
 * A simulated fleet for the routing benchmark's residency figures: workers with room for a fixed
 * number of resident versions (least recently used evicted), tenants with Zipf traffic, calls
 * that take a while and cold loads that take longer. Three routing policies over the same budget:
 *
 * - `subsets`: readie's (rendezvous subset of k, holders with room first by load, else the least
 *   loaded member with room loads it, one cold load per worker; a call is shed while its loader
 *   is busy loading or the subset is full, and retried after the hint);
 * - `everywhere`: every version may be on every worker: a holder with room anywhere first, else
 *   the least loaded worker with room loads it (no bound on concurrent loads);
 * - `least-loaded`: no subsets and no version awareness: the least loaded worker with room,
 *   loading the version when it does not hold it.
 *
 * A worker runs `maxConcurrent` calls at once; a call no worker can take is shed and retried.
 */
import { rendezvousSubset } from '../src/core/placement/index.js';

/** The policies compared. */
export type Policy = 'subsets' | 'everywhere' | 'least-loaded';

/** What a simulation is given. */
export interface SimulationOptions {
  readonly workers: number;
  /** Versions each worker can keep resident. */
  readonly residentSlots: number;
  readonly tenants: number;
  /** The Zipf exponent of tenants' traffic. */
  readonly zipf: number;
  readonly callsPerSecond: number;
  /** Simulated seconds measured, after `warmupSeconds`. */
  readonly seconds: number;
  readonly warmupSeconds: number;
  readonly callMs: number;
  readonly loadMs: number;
  /** Calls a worker runs at once (its container limit); a full worker takes no call. */
  readonly maxConcurrent: number;
  readonly retryAfterMs: number;
  /** Retries of a shed call before its client gives up. */
  readonly shedRetries: number;
  readonly seed: number;
}

/** What a simulation measured. */
export interface SimulationResult {
  readonly policy: string;
  /** Placed calls that met their version resident (no cold load). */
  readonly residencyHitRate: number;
  readonly coldLoadsPerMinute: number;
  readonly shedsPerMinute: number;
  /** Calls given up after `shedRetries` retries (what a client then raises), per minute. */
  readonly failedPerMinute: number;
  readonly callsPlaced: number;
}

/** A small seeded PRNG (mulberry32): the same run every time. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws tenant ranks from Zipf(`s`) over `n` tenants. */
function zipfSampler(n: number, s: number, next: () => number): () => number {
  const cumulative: number[] = [];
  let total = 0;
  for (let rank = 1; rank <= n; rank += 1) {
    total += 1 / rank ** s;
    cumulative.push(total);
  }
  return () => {
    const target = next() * total;
    let low = 0;
    let high = n - 1;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((cumulative[middle] as number) < target) low = middle + 1;
      else high = middle;
    }
    return low;
  };
}

interface SimWorker {
  readonly id: string;
  /** Resident versions, least recently used first. */
  readonly resident: Map<number, true>;
  /** End times of its running calls. */
  running: number[];
  /** Versions it is loading, and when each load ends. */
  readonly loading: Map<number, number>;
}

function isLoading(worker: SimWorker, now: number): boolean {
  for (const [version, until] of worker.loading) {
    if (until > now) return true;
    worker.loading.delete(version);
  }
  return false;
}

function holds(worker: SimWorker, version: number, now: number): boolean {
  return worker.resident.has(version) && !((worker.loading.get(version) ?? 0) > now);
}

/** Runs one policy (`k` for subsets) and measures it. */
export function simulate(policy: Policy, k: number, options: SimulationOptions): SimulationResult {
  const next = random(options.seed);
  const tenantOf = zipfSampler(options.tenants, options.zipf, next);
  const workers: SimWorker[] = Array.from({ length: options.workers }, (_, i) => ({
    id: `w${String(i).padStart(2, '0')}`,
    resident: new Map(),
    running: [],
    loading: new Map(),
  }));
  const byId = new Map(workers.map((worker) => [worker.id, worker]));
  const ids = workers.map((worker) => worker.id);
  const subsets = new Map<number, SimWorker[]>();
  const subsetOf = (tenant: number): SimWorker[] => {
    let subset = subsets.get(tenant);
    if (subset === undefined) {
      subset = rendezvousSubset(`tenant-${tenant}`, `version-${tenant}`, ids, k).map(
        (id) => byId.get(id) as SimWorker,
      );
      subsets.set(tenant, subset);
    }
    return subset;
  };
  const load = (worker: SimWorker, now: number) => {
    while (worker.running.length > 0 && (worker.running[0] as number) <= now)
      worker.running.shift();
    return worker.running.length;
  };
  /** The least loaded of `candidates` with room for a call, if any. */
  const leastLoaded = (candidates: readonly SimWorker[], now: number): SimWorker | undefined => {
    let best: SimWorker | undefined;
    for (const worker of candidates) {
      const busy = load(worker, now);
      if (busy >= options.maxConcurrent) continue;
      if (best === undefined || busy < load(best, now)) best = worker;
    }
    return best;
  };
  const touch = (worker: SimWorker, version: number, now: number) => {
    worker.resident.delete(version);
    worker.resident.set(version, true);
    insertEnd(worker, now + options.callMs);
  };
  const insertEnd = (worker: SimWorker, at: number) => {
    let index = worker.running.length;
    while (index > 0 && (worker.running[index - 1] as number) > at) index -= 1;
    worker.running.splice(index, 0, at);
  };
  const coldLoad = (worker: SimWorker, version: number, now: number) => {
    while (worker.resident.size >= options.residentSlots) {
      const oldest = worker.resident.keys().next().value as number;
      worker.resident.delete(oldest);
    }
    worker.loading.set(version, now + options.loadMs);
    worker.resident.set(version, true);
    insertEnd(worker, now + options.loadMs + options.callMs);
  };

  const measuredFrom = options.warmupSeconds * 1000;
  const end = measuredFrom + options.seconds * 1000;
  // Calls: fresh ones at the arrival rate, and retries of shed ones after the hint.
  const retries: { at: number; tenant: number; tries: number }[] = [];
  let hits = 0;
  let placed = 0;
  let loads = 0;
  let sheds = 0;
  let failed = 0;
  const interval = 1000 / options.callsPerSecond;
  for (let now = 0; now < end; now += interval) {
    const due: { tenant: number; tries: number }[] = [];
    while (retries.length > 0 && (retries[0] as { at: number }).at <= now) {
      due.push(retries.shift() as { tenant: number; tries: number });
    }
    due.push({ tenant: tenantOf(), tries: 0 });
    for (const { tenant, tries } of due) {
      const version = tenant;
      const measured = now >= measuredFrom;
      const shed = () => {
        if (measured) sheds += 1;
        if (tries < options.shedRetries) {
          retries.push({ at: now + options.retryAfterMs, tenant, tries: tries + 1 });
        } else if (measured) failed += 1;
      };
      let worker: SimWorker | undefined;
      let warm: boolean;
      if (policy === 'subsets') {
        const subset = subsetOf(tenant);
        worker = leastLoaded(
          subset.filter((w) => holds(w, version, now)),
          now,
        );
        warm = worker !== undefined;
        if (worker === undefined) {
          worker = leastLoaded(subset, now);
          if (worker === undefined || isLoading(worker, now)) {
            shed();
            continue;
          }
        }
      } else if (policy === 'everywhere') {
        worker = leastLoaded(
          workers.filter((w) => holds(w, version, now)),
          now,
        );
        warm = worker !== undefined;
        worker ??= leastLoaded(workers, now);
      } else {
        worker = leastLoaded(workers, now);
        warm = worker !== undefined && holds(worker, version, now);
      }
      if (worker === undefined) {
        shed();
        continue;
      }
      if (warm) touch(worker, version, now);
      else coldLoad(worker, version, now);
      if (measured) {
        placed += 1;
        if (warm) hits += 1;
        else loads += 1;
      }
    }
  }
  const minutes = options.seconds / 60;
  return {
    policy: policy === 'subsets' ? `subsets k=${k}` : policy,
    residencyHitRate: Math.round((hits / placed) * 10_000) / 10_000,
    coldLoadsPerMinute: Math.round(loads / minutes),
    shedsPerMinute: Math.round(sheds / minutes),
    failedPerMinute: Math.round(failed / minutes),
    callsPlaced: placed,
  };
}
