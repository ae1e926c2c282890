/**
 * The admission queue (docs/placement.md, "The admission queue"):
 * - admissions per second with 10,000 calls queued over 1,000 full workers (8 slots each), each
 *   round as the router runs it: a call finishes, admission is decided again and again until it
 *   admits nothing (as the router's admitter does: the last decision finds no head that fits), a
 *   new call arrives and queues; every decision's events appended to a real LMDB event log (its
 *   fold and placement's caches in step; the loop runs in one event turn, so its appends share
 *   one LMDB transaction, whose commit is awaited after the loop), and the same in memory (fold
 *   only); beside the same loop with no queue (a call finishes, a new call is placed at once) in
 *   the same run; of admission's time per call admitted, the µs deciding and the µs adding the
 *   events (the log's beside the fold's in memory); and with the log, each round in an event turn
 *   of its own (`turnPerRound`: a router whose finishes come one message at a time, each turn's
 *   appends a transaction of their own), where a turn holds a handful of writes, not thousands;
 * - fairness: two backlogged tenants with weights 1:1 and 2:1 (quotas) sharing the cluster, the
 *   slot-seconds each gets, their ratio beside the weights' and Jain's index over the weighted
 *   shares; and one call of a third tenant behind another's 10,000 queued: the slots that must
 *   free before it is admitted;
 * - the heap each queued call costs (10,000 queued beside none, after full GCs).
 */
import type { NewEvent } from '../src/events/index.js';
import { EventLog } from '../src/events/index.js';
import {
  applyInPlace,
  clusterProjectionTelling,
  initialState,
  type ClusterState,
} from '../src/projections/index.js';
import { decide } from '../src/core/decisions.js';
import { PlacementCaches } from '../src/core/placement/index.js';
import { validateEvent } from '../src/events/index.js';
import { demand, finished, GiB, registered, started } from '../test/support/events.js';
import { collectGarbage, perSecond, ratio, withTempDir } from './support.js';

const WORKERS = 1_000;
const SLOTS = 8;
const QUEUED = 10_000;
const ROUNDS = 2_000;
const COMMIT_EVERY = 100;

/** Where a loop's decisions go: folded in memory, or appended to a log that folds them. */
interface Cluster {
  readonly state: ClusterState;
  readonly caches: PlacementCaches;
  /** Appends (or folds) one decision's events; a log keeps the commit of every `COMMIT_EVERY`th. */
  add(events: readonly NewEvent[]): void;
  /** Awaits what was appended. */
  settle(): Promise<void>;
}

/** A folding state with placement's caches, stamping events as a log would. */
class Folding implements Cluster {
  state: ClusterState = initialState();
  readonly caches = new PlacementCaches();
  private seq = 0;

  add(events: readonly NewEvent[]): void {
    for (const event of events) {
      this.seq += 1;
      const at = new Date(Date.UTC(2026, 11, 1) + this.seq).toISOString();
      this.state = applyInPlace(
        this.state,
        validateEvent({ seq: this.seq, at, cause: null, ...event }),
        this.caches,
      );
    }
  }

  settle(): Promise<void> {
    return Promise.resolve();
  }
}

/** An LMDB event log whose fold keeps placement's caches in step, as the router's does. */
class Logged implements Cluster {
  private appends = 0;
  private pending: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly log: EventLog<ClusterState>,
    readonly caches: PlacementCaches,
  ) {}

  static open(dir: string): Logged {
    const caches = new PlacementCaches();
    const projection = clusterProjectionTelling(caches);
    return new Logged(EventLog.open<ClusterState>(dir, { projection, snapshotEvery: 0 }), caches);
  }

  get state(): ClusterState {
    return this.log.state;
  }

  add(events: readonly NewEvent[]): void {
    if (events.length === 0) return;
    const result = this.log.append([...events]);
    this.appends += 1;
    if (this.appends % COMMIT_EVERY === 0) this.pending = result.committed;
  }

  async settle(): Promise<void> {
    await this.pending;
    await this.log.flushed();
  }

  close(): Promise<void> {
    return this.log.close();
  }
}

/** Decides a call of `tenant` and adds its events. */
function arrive(cluster: Cluster, requestId: string, tenant: string): void {
  const made = decide('call', cluster.state, {
    call: { requestId, sessionId: null, tenantId: tenant, demand: demand({ memory: GiB }) },
    caches: cluster.caches,
  });
  cluster.add(made.events);
}

/** Fills `cluster`: 1,000 full workers (every slot held by a call of t0..t9), the queue on or off. */
function fill(cluster: Cluster, queueTimeout: number): string[] {
  cluster.add([started({ QUEUE_TIMEOUT: queueTimeout })]);
  for (let w = 0; w < WORKERS; w += 1) {
    cluster.add([registered(`w${w}`, { memoryTotal: 64 * GiB, maxContainers: SLOTS })]);
  }
  const running: string[] = [];
  for (let i = 0; i < WORKERS * SLOTS; i += 1) {
    arrive(cluster, `run-${i}`, `t${i % 10}`);
    running.push(`run-${i}`);
  }
  return running;
}

function finish(cluster: Cluster, requestId: string): void {
  cluster.add([finished(requestId)]);
}

/** What one admission loop measured. */
interface AdmissionRun {
  /** Calls admitted per second of admission (every decision, the last fruitless one included). */
  readonly perSecond: number;
  /** Admission decisions per second (each admitted call's, and each round's last, admitting none). */
  readonly decisionsPerSecond: number;
  /** Whole rounds per second: a call finishes, admission, a new call arrives and queues. */
  readonly roundsPerSecond: number;
  /** Of admission's time per call admitted, µs deciding (both decisions of its round). */
  readonly decideMicros: number;
  /** Of admission's time per call admitted, µs adding the decisions' events (log or fold). */
  readonly addMicros: number;
  readonly queued: number;
}

/**
 * Each round: finish one, admit until nothing is admitted (as the router's admitter does), one
 * more arrives and queues.
 */
async function admissions(cluster: Cluster, turnPerRound = false): Promise<AdmissionRun> {
  const running = fill(cluster, 600_000);
  for (let i = 0; i < QUEUED; i += 1) arrive(cluster, `q-${i}`, `t${i % 10}`);
  await cluster.settle();
  const queued = cluster.state.queue.size;
  let admitted = 0;
  let decisions = 0;
  let admittingMs = 0;
  let decidingMs = 0;
  const start = performance.now();
  for (let round = 0; round < ROUNDS; round += 1) {
    finish(cluster, running[round % running.length] as string);
    const admitting = performance.now();
    for (;;) {
      const deciding = performance.now();
      const made = decide('admit', cluster.state, { caches: cluster.caches });
      decidingMs += performance.now() - deciding;
      decisions += 1;
      cluster.add(made.events);
      if (made.requestId === null) break;
      admitted += 1;
      running[round % running.length] = made.requestId;
    }
    admittingMs += performance.now() - admitting;
    arrive(cluster, `n-${round}`, `t${round % 10}`);
    if (turnPerRound) await new Promise((resolve) => setImmediate(resolve));
  }
  await cluster.settle();
  const ms = performance.now() - start;
  if (admitted !== ROUNDS) throw new Error(`admitted ${admitted} of ${ROUNDS}`);
  if (cluster.state.queue.size !== queued) throw new Error('the queue did not stay at its depth');
  return {
    perSecond: perSecond(admitted, admittingMs),
    decisionsPerSecond: perSecond(decisions, admittingMs),
    roundsPerSecond: perSecond(ROUNDS, ms),
    decideMicros: micros(decidingMs, admitted),
    addMicros: micros(admittingMs - decidingMs, admitted),
    queued,
  };
}

/** µs per item of `ms` spent over `count` items, to 0.1. */
function micros(ms: number, count: number): number {
  return Math.round((ms * 10_000) / count) / 10;
}

/** The same loop with no queue: finish one, a new call is placed at once. */
async function placements(cluster: Cluster): Promise<number> {
  const running = fill(cluster, 0);
  await cluster.settle();
  const start = performance.now();
  for (let round = 0; round < ROUNDS; round += 1) {
    finish(cluster, running[round % running.length] as string);
    const requestId = `p-${round}`;
    arrive(cluster, requestId, `t${round % 10}`);
    if (!cluster.state.reservations.has(requestId)) throw new Error('not placed');
    running[round % running.length] = requestId;
  }
  await cluster.settle();
  return perSecond(ROUNDS, performance.now() - start);
}

/** `body` on a fresh LMDB log in a temporary directory. */
async function onLog<T>(body: (cluster: Cluster) => Promise<T>): Promise<T> {
  return withTempDir(async (dir) => {
    const logged = Logged.open(dir);
    try {
      return await body(logged);
    } finally {
      await logged.close();
    }
  });
}

/** A cluster of 100 workers (800 slots) with the queue on, and weights by tenant. */
function weightedCluster(weights: Record<string, number>): Folding {
  const folding = new Folding();
  folding.add([started({ QUEUE_TIMEOUT: 600_000 })]);
  for (let w = 0; w < 100; w += 1) {
    folding.add([registered(`w${w}`, { memoryTotal: 64 * GiB, maxContainers: SLOTS })]);
  }
  for (const [tenantId, weight] of Object.entries(weights)) {
    const made = decide('quotaSet', folding.state, {
      tenantId,
      weight,
      maxSlots: null,
      maxQueued: null,
      expectRevision: null,
    });
    folding.add(made.events);
  }
  return folding;
}

/**
 * Two backlogged tenants sharing 100 workers with weights a:b: the slot-seconds each gets over
 * 4,000 turnovers after 2,000 to settle (one turnover a time unit), their ratio beside the
 * weights', and Jain's index over the slot-seconds divided by the weights (1.0: exactly fair).
 */
function fairness(weightA: number, weightB: number) {
  const folding = weightedCluster(weightA === 1 && weightB === 1 ? {} : { a: weightA, b: weightB });
  // A arrives first and takes every slot; both keep 2,000 calls waiting.
  for (let i = 0; i < 800 + 2_000; i += 1) arrive(folding, `a-${i}`, 'a');
  for (let i = 0; i < 2_000; i += 1) arrive(folding, `b-${i}`, 'b');
  const running = [...folding.state.reservations.keys()];
  let a = 2_800;
  let b = 2_000;
  const slotSeconds = { a: 0, b: 0 };
  for (let round = 0; round < 6_000; round += 1) {
    const index = round % running.length;
    folding.add([
      {
        type: 'CallFinished',
        requestId: running[index] as string,
        ok: true,
        code: null,
        message: null,
        raised: null,
        inputsRaised: null,
      },
    ]);
    const made = decide('admit', folding.state, { caches: folding.caches });
    folding.add(made.events);
    if (made.requestId !== null) running[index] = made.requestId;
    const tenant = made.requestId?.startsWith('a-') ? 'a' : 'b';
    // The admitted call's tenant queues one more, so both stay backlogged.
    if (tenant === 'a') arrive(folding, `a-${(a += 1)}`, 'a');
    else arrive(folding, `b-${(b += 1)}`, 'b');
    if (round < 2_000) continue;
    const held = folding.state.admission.held;
    slotSeconds.a += held.get('a') ?? 0;
    slotSeconds.b += held.get('b') ?? 0;
  }
  const x = [slotSeconds.a / weightA, slotSeconds.b / weightB];
  const sum = x[0]! + x[1]!;
  const jainIndex = (sum * sum) / (2 * (x[0]! ** 2 + x[1]! ** 2));
  const measured = slotSeconds.a / slotSeconds.b;
  const target = weightA / weightB;
  return {
    weights: `${weightA}:${weightB}`,
    slotSeconds,
    ratio: Math.round(measured * 10_000) / 10_000,
    targetRatio: target,
    offByPercent: Math.round((Math.abs(measured - target) / target) * 10_000) / 100,
    targetOffByPercentAtMost: 5,
    jainIndexWeighted: Math.round(jainIndex * 10_000) / 10_000,
    targetJainIndexAtLeast: 0.95,
  };
}

/**
 * One call of tenant c waiting behind a's 10,000 queued calls on a full cluster: how many slots
 * must free before it is admitted (target 1: the first one).
 */
function smallTenantBehindBacklog() {
  const folding = weightedCluster({});
  for (let i = 0; i < 800 + QUEUED; i += 1) arrive(folding, `a-${i}`, 'a');
  arrive(folding, 'c-1', 'c');
  const running = [...folding.state.reservations.keys()];
  let freed = 0;
  let admittedC = false;
  while (!admittedC && freed < running.length) {
    folding.add([
      {
        type: 'CallFinished',
        requestId: running[freed]!,
        ok: true,
        code: null,
        message: null,
        raised: null,
        inputsRaised: null,
      },
    ]);
    freed += 1;
    const made = decide('admit', folding.state, { caches: folding.caches });
    folding.add(made.events);
    admittedC = made.requestId === 'c-1';
  }
  return {
    queuedAhead: QUEUED,
    slotsFreedUntilAdmitted: admittedC ? freed : null,
    targetAtMost: 1,
    baselineFifoSlots: QUEUED + 1,
  };
}

/** Heap bytes per queued call: 10,000 queued beside none. */
function memoryPerQueuedCall(): number {
  const folding = new Folding();
  fill(folding, 600_000);
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < QUEUED; i += 1) arrive(folding, `m-${i}`, `t${i % 10}`);
  collectGarbage();
  const after = process.memoryUsage().heapUsed;
  if (folding.state.queue.size !== QUEUED) throw new Error('not all queued');
  // The pending record of each call (what a call costs before its placement) is counted too.
  return Math.round((after - before) / QUEUED);
}

/** Runs the queue benchmarks. */
export async function run(): Promise<unknown> {
  // Alternate each figure and its baseline: this machine's speed drifts. The best of three runs
  // of each: the first of a kind runs before the compiler has optimized its loop (every run is
  // listed in `runs`).
  const logged: AdmissionRun[] = [];
  const loggedPerTurn: AdmissionRun[] = [];
  const loggedBaseline: number[] = [];
  const memory: AdmissionRun[] = [];
  const memoryBaseline: number[] = [];
  for (let i = 0; i < 3; i += 1) {
    logged.push(await onLog(admissions));
    loggedPerTurn.push(await onLog((cluster) => admissions(cluster, true)));
    loggedBaseline.push(await onLog(placements));
    memory.push(await admissions(new Folding()));
    memoryBaseline.push(await placements(new Folding()));
  }
  const best = (values: number[]) => Math.max(...values);
  const figures = (runs: AdmissionRun[], baseline: number[]) => {
    const rate = best(runs.map((r) => r.perSecond));
    // The run that gave the best rate: where its time per admitted call went.
    const fastest = runs.find((r) => r.perSecond === rate);
    return {
      perSecond: rate,
      runs: runs.map((r) => r.perSecond),
      decideMicros: fastest?.decideMicros,
      addMicros: fastest?.addMicros,
      decisionsPerSecond: best(runs.map((r) => r.decisionsPerSecond)),
      roundsPerSecond: best(runs.map((r) => r.roundsPerSecond)),
      baselineNoQueuePerSecond: best(baseline),
      baselineRuns: baseline,
      ratio: ratio(rate, best(baseline)),
    };
  };
  return {
    admissions: {
      workers: WORKERS,
      queued: logged[0]?.queued,
      target: 20_000,
      withLog: figures(logged, loggedBaseline),
      // Admission's own time, as `withLog`'s; no baseline of its own (the loop with no queue
      // times whole rounds, which here would count the waits between turns).
      withLogTurnPerRound: {
        perSecond: best(loggedPerTurn.map((r) => r.perSecond)),
        runs: loggedPerTurn.map((r) => r.perSecond),
      },
      inMemory: figures(memory, memoryBaseline),
      // What the log adds per admitted call beside folding in memory (its baseline), same run.
      addMicros: {
        withLog: Math.min(...logged.map((r) => r.addMicros)),
        baselineInMemory: Math.min(...memory.map((r) => r.addMicros)),
      },
    },
    fairness: { equal: fairness(1, 1), weighted: fairness(2, 1) },
    smallTenantBehindBacklog: smallTenantBehindBacklog(),
    bytesPerQueuedCall: memoryPerQueuedCall(),
  };
}
