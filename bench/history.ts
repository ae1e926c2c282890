/**
 * `npm run bench -- history`: what the call history costs the router (docs/calls.md).
 *
 * - Hot path: the router folds every appended event into its cluster state; with the history, each
 *   event also goes to `CallHistory.observe`. The same stream of calls (request, placement, bound,
 *   end, one call in 10 queued and admitted first, one in 10 raised, and a load report every 4
 *   calls, as a busy worker sends) is folded with and without the
 *   history, in alternating rounds; the cost per call is the difference, beside the fold's own cost
 *   per call (the baseline): the median of the rounds' paired differences. The history alone
 *   (`observe` of the same events) is measured too. Each figure is on the clock, and beside it the
 *   process's CPU time in the same rounds (on a shared machine the clock also counts the turns
 *   other processes took), with the load average before and after.
 * - Memory: the heap a full history holds per remembered call, after full GCs, beside the bytes of
 *   the call's events as the log stores them (JSONL), and the history's own estimate of it.
 */
import { loadavg } from 'node:os';
import type { ClusterEvent } from '../src/events/types.js';
import { encodeEvent } from '../src/events/decode.js';
import { EVENT_SCHEMA_VERSION } from '../src/events/schema.js';
import { PLACEMENT_RULES_VERSION } from '../src/core/placement/index.js';
import { CallHistory } from '../src/projections/call-history.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { demand } from '../test/support/events.js';
import { collectGarbage, median, ratio } from './support.js';

/** Every call's demand: numpy, nothing else asked. */
const NUMPY_DEMAND = demand({ imports: ['numpy'] });

const CALLS = 100_000;
const WORKERS = 50;
const ROUNDS = 9;
const START = Date.UTC(2026, 11, 1);

/** The events of `calls` calls over `WORKERS` workers, stamped as a log would (1 ms apart). */
function callEvents(calls: number): ClusterEvent[] {
  const events: ClusterEvent[] = [];
  let seq = 0;
  const stamp = (event: Record<string, unknown>) => {
    seq += 1;
    events.push({
      seq,
      at: new Date(START + seq).toISOString(),
      cause: null,
      ...event,
    } as ClusterEvent);
  };
  // A router's start as today's router writes it (the event schema in force: v2), so the fold
  // applies events only, as on the router's hot path (a log without one is read as v1).
  stamp({
    type: 'RouterStarted',
    config: {},
    version: 'bench',
    rulesVersion: PLACEMENT_RULES_VERSION,
    routerId: null,
    takeoverFrom: null,
    schemaVersion: EVENT_SCHEMA_VERSION,
  });
  for (let w = 0; w < WORKERS; w += 1) {
    stamp({
      type: 'WorkerRegistered',
      workerId: `worker-${w}`,
      address: `10.0.0.${w}:50052`,
      status: 'ready',
      error: null,
      flavor: 'cpu',
      memoryTotal: 64 * 1024 ** 3,
      maxContainers: 64,
      gpuMemoryTotal: null,
      instanceId: null,
      containers: null,
      reportSeq: null,
    });
  }
  for (let i = 0; i < calls; i += 1) {
    const requestId = `req-${i.toString(16).padStart(32, '0')}`;
    const workerId = `worker-${i % WORKERS}`;
    stamp({
      type: 'CallRequested',
      requestId,
      sessionId: null,
      tenantId: `tenant-${i % 100}`,
      demand: NUMPY_DEMAND,
      retryOf: null,
      function: 'jobs.scoring.score_batch',
      turnWaitMs: null,
    });
    // One call in 10 waits in the admission queue first (the history's `queued` state).
    if (i % 10 === 4) {
      stamp({
        type: 'CallQueued',
        requestId,
        sessionId: null,
        tenantId: `tenant-${i % 100}`,
        demand: NUMPY_DEMAND,
        retryOf: null,
        why: `tenant tenant-${i % 100} holds its quota's 4 slots (max-slots)`,
      });
      stamp({ type: 'CallAdmitted', requestId });
    }
    stamp({
      type: 'CallPlaced',
      requestId,
      sessionId: null,
      workerId,
      containerId: null,
      checkpointId: 'ckpt-numpy',
      packages: [],
      skippedPackages: [],
      memory: 1024 ** 3,
      version: null,
      routingRevision: null,
      coldLoad: false,
    });
    stamp({
      type: 'CallBound',
      requestId,
      containerId: `c-${i.toString(16)}`,
      checkpointId: 'ckpt-numpy',
    });
    // One call in 10 ends OK with its function having raised (the history's `raised` state).
    const raised = i % 10 === 9 ? { type: 'ValueError', message: `bad input ${i}` } : null;
    stamp({ type: 'CallFinished', requestId, ok: true, code: null, message: null, raised });
    if (i % 4 === 3) {
      stamp({
        type: 'WorkerUtilization',
        workerId,
        memoryUsed: 1024 ** 3,
        containerCount: 1,
        cpuUsed: 0.5,
        cpuTotal: 8,
        gpuMemoryUsed: null,
        containers: null,
        reportSeq: null,
      });
    }
  }
  return events;
}

/** A round's time, ms: on the clock, and on the process's CPUs (its GC threads included). */
interface RoundTime {
  readonly wall: number;
  readonly cpu: number;
}

/** Times `work`: the clock, and the CPU time the process spent meanwhile. */
function roundTime(work: () => void): RoundTime {
  const cpu = process.cpuUsage();
  const started = performance.now();
  work();
  const wall = performance.now() - started;
  const spent = process.cpuUsage(cpu);
  return { wall, cpu: (spent.user + spent.system) / 1000 };
}

/** Folds `events` into a fresh cluster state, each also told to `history` when given. */
function foldTime(events: readonly ClusterEvent[], history: CallHistory | null): RoundTime {
  let state: ClusterState = initialState();
  return roundTime(() => {
    for (const event of events) {
      history?.observe(event);
      state = applyInPlace(state, event);
    }
  });
}

function observeTime(events: readonly ClusterEvent[], history: CallHistory): RoundTime {
  return roundTime(() => {
    for (const event of events) history.observe(event);
  });
}

const bounds = { maxCalls: 10_000, retentionMs: 86_400_000 };
const micro = (ms: number) => Math.round((ms * 1000 * 1000) / CALLS) / 1000;

/** Paired: each round's fold with the history beside the same round's without it; ms. */
function added(withHistory: readonly number[], without: readonly number[]): number {
  return median(withHistory.map((ms, round) => ms - (without[round] ?? ms)));
}

/**
 * The hot path: fold with and without the history, alternating; µs per call. Every figure is
 * on the clock (what the target names); the `Cpu` figures beside them are the process's
 * CPU time in the same rounds, which a loaded machine (`loadAverage`) inflates less.
 */
function hotPath(events: readonly ClusterEvent[]) {
  const withHistory: RoundTime[] = [];
  const without: RoundTime[] = [];
  const alone: RoundTime[] = [];
  const loadBefore = loadavg()[0] ?? 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    collectGarbage();
    without.push(foldTime(events, null));
    collectGarbage();
    withHistory.push(foldTime(events, new CallHistory(bounds)));
    collectGarbage();
    alone.push(observeTime(events, new CallHistory(bounds)));
  }
  const wall = (rounds: readonly RoundTime[]) => rounds.map((time) => time.wall);
  const cpu = (rounds: readonly RoundTime[]) => rounds.map((time) => time.cpu);
  const foldUs = micro(median(wall(without)));
  const historyUs = micro(median(wall(alone)));
  const foldCpuUs = micro(median(cpu(without)));
  const historyCpuUs = micro(median(cpu(alone)));
  return {
    calls: CALLS,
    eventsPerCall: Math.round((events.length / CALLS) * 100) / 100,
    rounds: ROUNDS,
    loadAverage: [loadBefore, loadavg()[0] ?? 0].map((load) => Math.round(load * 10) / 10),
    historyObservePerCallUs: historyUs,
    foldWithHistoryPerCallUs: micro(median(wall(withHistory))),
    foldAlonePerCallUs: foldUs,
    addedToFoldPerCallUs: micro(added(wall(withHistory), wall(without))),
    ratioObserveToFold: ratio(historyUs, foldUs),
    historyObserveCpuPerCallUs: historyCpuUs,
    foldAloneCpuPerCallUs: foldCpuUs,
    addedToFoldCpuPerCallUs: micro(added(cpu(withHistory), cpu(without))),
    ratioObserveToFoldCpu: ratio(historyCpuUs, foldCpuUs),
    targetPerCallUs: 5,
  };
}

/** Heap per remembered call of a full history, beside the log's bytes per call. */
function memory(events: readonly ClusterEvent[]) {
  const held = 100_000;
  collectGarbage();
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  const history = new CallHistory({ maxCalls: held, retentionMs: 86_400_000 });
  for (const event of events) history.observe(event);
  collectGarbage();
  collectGarbage();
  const after = process.memoryUsage().heapUsed;
  const perCall = Math.round((after - before) / history.size);
  let logBytes = 0;
  let calls = 0;
  for (const event of events) {
    if (event.type.startsWith('Call')) logBytes += encodeEvent(event).length + 1;
    if (event.type === 'CallRequested') calls += 1;
  }
  const logPerCall = Math.round(logBytes / calls);
  const estimate = Math.round(history.window().approxBytes / history.size);
  return {
    callsHeld: history.size,
    heapPerCallBytes: perCall,
    logBytesPerCall: logPerCall,
    ratioHeapToLog: ratio(perCall, logPerCall),
    estimatePerCallBytes: estimate,
    ratioEstimateToHeap: ratio(estimate, perCall),
    heapForDefaultBoundMB: Math.round((perCall * 10_000) / 1e5) / 10,
  };
}

/** Runs both parts. */
export async function run(): Promise<unknown> {
  const events = callEvents(CALLS);
  return Promise.resolve({ hotPath: hotPath(events), memory: memory(events) });
}
