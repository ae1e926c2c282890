/**
 * The admission queue (docs/placement.md, "The admission queue"), in memory (decide, then fold
 * the decision's events into the state, as the router's journal does, without the disk):
 * - admissions per second with 10,000 calls queued over 1,000 full workers (8 slots each): a call
 *   finishes, admission admits the next in fair order, a new call arrives and queues, beside the
 *   same loop with no queue (a call finishes, a new call is placed at once) in the same run;
 * - fairness: two backlogged tenants with weights 1:1 and 2:1 (quotas) sharing the cluster, the
 *   slot-seconds each gets, their ratio beside the weights' and Jain's index over the weighted
 *   shares; and one call of a third tenant behind another's 10,000 queued: the slots that must
 *   free before it is admitted;
 * - the heap each queued call costs (10,000 queued beside none, after full GCs).
 */
import type { NewEvent } from '../src/events/index.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { decide } from '../src/core/decisions.js';
import { PlacementCaches } from '../src/core/placement/index.js';
import { validateEvent } from '../src/events/index.js';
import { demand, GiB, registered, started } from '../test/support/events.js';
import { collectGarbage, perSecond, ratio } from './support.js';

const WORKERS = 1_000;
const SLOTS = 8;
const QUEUED = 10_000;
const ROUNDS = 2_000;

/** A folding state with placement's caches, stamping events as a log would. */
class Folding {
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

  /** A call of `tenant` decided and folded; true when it was placed. */
  call(requestId: string, tenant: string): void {
    const made = decide('call', this.state, {
      call: { requestId, sessionId: null, tenantId: tenant, demand: demand({ memory: GiB }) },
      caches: this.caches,
    });
    this.add(made.events);
  }
}

/** 1,000 full workers (every slot held by a call of t0..t9), the queue on or off. */
function fullCluster(queueTimeout: number): { folding: Folding; running: string[] } {
  const folding = new Folding();
  folding.add([started({ QUEUE_TIMEOUT: queueTimeout })]);
  for (let w = 0; w < WORKERS; w += 1) {
    folding.add([registered(`w${w}`, { memoryTotal: 64 * GiB, maxContainers: SLOTS })]);
  }
  const running: string[] = [];
  for (let i = 0; i < WORKERS * SLOTS; i += 1) {
    folding.call(`run-${i}`, `t${i % 10}`);
    running.push(`run-${i}`);
  }
  return { folding, running };
}

/** Admissions per second: finish one, admit the next in fair order, one more arrives and queues. */
function admissions(): { perSecond: number; queued: number } {
  const { folding, running } = fullCluster(600_000);
  for (let i = 0; i < QUEUED; i += 1) folding.call(`q-${i}`, `t${i % 10}`);
  const queued = folding.state.queue.size;
  let next = 0;
  let admitted = 0;
  const start = performance.now();
  for (let round = 0; round < ROUNDS; round += 1) {
    const done = running[round % running.length] as string;
    folding.add([{ type: 'CallFinished', requestId: done, ok: true, code: null, message: null }]);
    const made = decide('admit', folding.state, { caches: folding.caches });
    folding.add(made.events);
    if (made.requestId !== null) {
      admitted += 1;
      running[round % running.length] = made.requestId;
    }
    folding.call(`n-${next}`, `t${next % 10}`);
    next += 1;
  }
  const ms = performance.now() - start;
  if (admitted !== ROUNDS) throw new Error(`admitted ${admitted} of ${ROUNDS}`);
  return { perSecond: perSecond(ROUNDS, ms), queued };
}

/** The same loop with no queue: finish one, a new call is placed at once. */
function placements(): number {
  const { folding, running } = fullCluster(0);
  const start = performance.now();
  for (let round = 0; round < ROUNDS; round += 1) {
    const done = running[round % running.length] as string;
    folding.add([{ type: 'CallFinished', requestId: done, ok: true, code: null, message: null }]);
    const requestId = `p-${round}`;
    folding.call(requestId, `t${round % 10}`);
    if (!folding.state.reservations.has(requestId)) throw new Error('not placed');
    running[round % running.length] = requestId;
  }
  return perSecond(ROUNDS, performance.now() - start);
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
  for (let i = 0; i < 800 + 2_000; i += 1) folding.call(`a-${i}`, 'a');
  for (let i = 0; i < 2_000; i += 1) folding.call(`b-${i}`, 'b');
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
      },
    ]);
    const made = decide('admit', folding.state, { caches: folding.caches });
    folding.add(made.events);
    if (made.requestId !== null) running[index] = made.requestId;
    const tenant = made.requestId?.startsWith('a-') ? 'a' : 'b';
    // The admitted call's tenant queues one more, so both stay backlogged.
    if (tenant === 'a') folding.call(`a-${(a += 1)}`, 'a');
    else folding.call(`b-${(b += 1)}`, 'b');
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
  for (let i = 0; i < 800 + QUEUED; i += 1) folding.call(`a-${i}`, 'a');
  folding.call('c-1', 'c');
  const running = [...folding.state.reservations.keys()];
  let freed = 0;
  let admittedC = false;
  while (!admittedC && freed < running.length) {
    folding.add([
      { type: 'CallFinished', requestId: running[freed]!, ok: true, code: null, message: null },
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
  const { folding } = fullCluster(600_000);
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < QUEUED; i += 1) folding.call(`m-${i}`, `t${i % 10}`);
  collectGarbage();
  const after = process.memoryUsage().heapUsed;
  if (folding.state.queue.size !== QUEUED) throw new Error('not all queued');
  // The pending record of each call (what a call costs before its placement) is counted too.
  return Math.round((after - before) / QUEUED);
}

/** Runs the queue benchmarks. */
export async function run(): Promise<unknown> {
  // Alternate the figure and its baseline: this machine's speed drifts.
  const admitted: number[] = [];
  const placed: number[] = [];
  let queued = 0;
  for (let i = 0; i < 2; i += 1) {
    const figure = admissions();
    queued = figure.queued;
    admitted.push(figure.perSecond);
    placed.push(placements());
  }
  const best = (values: number[]) => Math.max(...values);
  await Promise.resolve();
  return {
    admissions: {
      workers: WORKERS,
      queued,
      perSecond: best(admitted),
      runs: admitted,
      baselineNoQueuePerSecond: best(placed),
      baselineRuns: placed,
      ratio: ratio(best(admitted), best(placed)),
    },
    fairness: { equal: fairness(1, 1), weighted: fairness(2, 1) },
    smallTenantBehindBacklog: smallTenantBehindBacklog(),
    bytesPerQueuedCall: memoryPerQueuedCall(),
  };
}
