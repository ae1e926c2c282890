/**
 * `npm run bench -- history`: what the call history costs the router (docs/calls.md).
 *
 * - Hot path: the router folds every appended event into its cluster state; with the history, each
 *   event also goes to `CallHistory.observe`. The same stream of calls (request, placement, bound,
 *   end, and a load report every 4 calls, as a busy worker sends) is folded with and without the
 *   history, in alternating rounds; the cost per call is the difference, beside the fold's own cost
 *   per call (the baseline): the median of the rounds' paired differences. The history alone
 *   (`observe` of the same events) is measured too.
 * - Memory: the heap a full history holds per remembered call, after full GCs, beside the bytes of
 *   the call's events as the log stores them (JSONL), and the history's own estimate of it.
 */
import type { ClusterEvent } from '../src/events/types.js';
import { encodeEvent } from '../src/events/decode.js';
import { EVENT_SCHEMA_VERSION } from '../src/events/schema.js';
import { PLACEMENT_RULES_VERSION } from '../src/core/placement/index.js';
import { CallHistory } from '../src/projections/call-history.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { collectGarbage, median, ratio } from './support.js';

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
      demand: {
        memory: null,
        gpuMemory: null,
        gpu: null,
        disableOptimizedExecution: null,
        checkpointId: null,
        imports: ['numpy'],
        packages: null,
        pinned: null,
      },
      retryOf: null,
      function: 'jobs.scoring.score_batch',
      turnWaitMs: null,
    });
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
    stamp({ type: 'CallFinished', requestId, ok: true, code: null, message: null });
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

/** Folds `events` into a fresh cluster state, each also told to `history` when given; ms. */
function foldTime(events: readonly ClusterEvent[], history: CallHistory | null): number {
  let state: ClusterState = initialState();
  const started = performance.now();
  for (const event of events) {
    history?.observe(event);
    state = applyInPlace(state, event);
  }
  return performance.now() - started;
}

function observeTime(events: readonly ClusterEvent[], history: CallHistory): number {
  const started = performance.now();
  for (const event of events) history.observe(event);
  return performance.now() - started;
}

const bounds = { maxCalls: 10_000, retentionMs: 86_400_000 };
const micro = (ms: number) => Math.round((ms * 1000 * 1000) / CALLS) / 1000;

/** The hot path: fold with and without the history, alternating; µs per call. */
function hotPath(events: readonly ClusterEvent[]) {
  const withHistory: number[] = [];
  const without: number[] = [];
  const alone: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    collectGarbage();
    without.push(foldTime(events, null));
    collectGarbage();
    withHistory.push(foldTime(events, new CallHistory(bounds)));
    collectGarbage();
    alone.push(observeTime(events, new CallHistory(bounds)));
  }
  const foldUs = micro(median(without));
  const historyUs = micro(median(alone));
  // Paired: each round's fold with the history beside the same round's without it.
  const addedUs = micro(median(withHistory.map((ms, round) => ms - (without[round] ?? ms))));
  return {
    calls: CALLS,
    eventsPerCall: Math.round((events.length / CALLS) * 100) / 100,
    rounds: ROUNDS,
    historyObservePerCallUs: historyUs,
    foldWithHistoryPerCallUs: micro(median(withHistory)),
    foldAlonePerCallUs: foldUs,
    addedToFoldPerCallUs: addedUs,
    ratioObserveToFold: ratio(historyUs, foldUs),
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
