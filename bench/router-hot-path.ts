/**
 * The router's own work per call, in this process, without a transport: the whole call shell
 * (`CallRelay` driving the core's machine, with a real journal on LMDB, logs to /dev/null and
 * metrics, its ends stand-ins that answer at once), then its pieces alone: the three appends a
 * call makes (decision, binding, finish; each decided by the core and folded), the logger (the
 * call's one info line), and the metrics it counts. Each figure is microseconds per call;
 * `shareOfRouterCpu` divides it by the router's CPU per call measured in the same run.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { causeText, EventLog } from '../src/events/index.js';
import { decideBound, decideCall, decideCallEnd } from '../src/core/calls/call-steps.js';
import { placedIds } from '../src/core/calls/worker-header.js';
import { PlacementCaches } from '../src/core/placement/index.js';
import { clusterProjectionTelling, type ClusterState } from '../src/projections/index.js';
import { CallRelay, type CallPathOptions } from '../src/router/calls/call-relay.js';
import { ActiveCalls } from '../src/router/calls/active-calls.js';
import type { ClientEnd, ClientEndEvents, WorkerLinks } from '../src/router/calls/call-ends.js';
import { decodeClientMessage, decodeWorkerAnswer } from '../src/router/calls/relay-codec.js';
import { Journal } from '../src/router/journal/journal.js';
import { SessionTurns } from '../src/router/sessions/session-turns.js';
import { DEFAULT_CONFIG } from '../src/shared/config.js';
import { ExecuteResponse } from '../src/proto/gen/readie/v1/execution.js';
import { PayloadFormat } from '../src/proto/gen/readie/v1/call.js';
import { RequestExecutionRequest } from '../src/proto/gen/readie/v1/proxy.js';
import { createLogger, RouterMetrics } from '../src/router/observability/index.js';
import { callLogger } from '../src/router/observability/logger.js';
import { registered } from '../test/support/events.js';
import { collectGarbage, withTempDir } from './support.js';

const CALLS = 20_000;

function demand() {
  return {
    memory: 1024 * 1024,
    gpuMemory: null,
    gpu: false,
    disableOptimizedExecution: false,
    checkpointId: null,
    imports: [],
    packages: [],
    pinned: null,
  };
}

/** This process's CPU time (every thread, user and system) in microseconds. */
function cpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** CPU microseconds per call of `body`, run `CALLS` times (best of 3 runs). */
async function perCallUs(body: (index: number) => void, settle?: () => Promise<void>) {
  let best = Infinity;
  for (let run = 0; run < 3; run += 1) {
    collectGarbage();
    const start = cpuUs();
    for (let index = 0; index < CALLS; index += 1) body(run * CALLS + index);
    await settle?.();
    best = Math.min(best, cpuUs() - start);
  }
  return Math.round((best / CALLS) * 10) / 10;
}

/** A call's first message, as the router decodes it. */
function configOf(requestId: string) {
  return decodeClientMessage(
    Buffer.from(
      RequestExecutionRequest.encode({
        message: {
          $case: 'config',
          value: {
            requestId,
            sessionId: '',
            imports: [],
            gpu: false,
            disableOptimizedExecution: false,
            packages: [],
            checkpointId: '',
            pythonVersion: '3.11.2',
            format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
            memory: 1024 * 1024,
            pinned: false,
            retryOf: '',
            function: '',
          },
        },
      }).finish(),
    ),
  );
}

const CHUNK = decodeClientMessage(
  Buffer.from(
    RequestExecutionRequest.encode({
      message: { $case: 'chunk', value: { data: Buffer.alloc(64, 120) } },
    }).finish(),
  ),
);

/** The worker's one answer: the container named, the echo. */
function answerOf(requestId: string) {
  return decodeWorkerAnswer(
    Buffer.from(
      ExecuteResponse.encode({
        ids: {
          requestId,
          sessionId: '',
          workerId: 'w1',
          containerId: 'c1',
          checkpointId: '',
          version: '',
          routingRevision: 0,
        },
        message: { $case: 'chunk', value: { data: Buffer.alloc(64, 120) } },
      }).finish(),
    ),
  );
}

/** Runs `calls` calls through the real shell with stand-in ends; resolves when all ended. */
async function shellCalls(options: CallPathOptions, calls: number, offset: number) {
  for (let index = 0; index < calls; index += 1) {
    const requestId = `s${offset + index}`;
    await new Promise<void>((resolve) => {
      let events: ClientEndEvents | undefined;
      const client: ClientEnd = {
        deadline: Infinity,
        listen: (listener) => (events = listener),
        pause: () => undefined,
        resume: () => undefined,
        write: () => true,
        end: () => resolve(),
        fail: (code, details) => {
          throw new Error(`benchmark call failed: ${code} ${details}`);
        },
      };
      new CallRelay(options, client, 'bench').start();
      events?.message(configOf(requestId));
      events?.message(CHUNK);
      events?.ended();
    });
    // The next call in a later turn, as calls come: each append its own LMDB transaction.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Workers that take a call and answer it at once (the next microtasks). */
function answeringWorkers(): WorkerLinks {
  return {
    dial: () => Promise.resolve(),
    open: (_address, _deadline, header, events) => {
      const requestId = header.ids?.requestId ?? '';
      // The answer in a later turn than the call, as a worker's comes.
      setImmediate(() => {
        events.answer(answerOf(requestId));
        events.ended(0, '', {});
      });
      return {
        send: () => true,
        halfClose: () => undefined,
        pause: () => undefined,
        resume: () => undefined,
        cancel: () => undefined,
      };
    },
  };
}

/** Measures each piece; `routerCpuUs` is the router's CPU per call from the same run. */
export async function measureHotPath(routerCpuUs: number, { shellOnly = false } = {}) {
  return withTempDir(async (dir) => {
    const caches = new PlacementCaches();
    const log = EventLog.open<ClusterState>(join(dir, 'log'), {
      projection: clusterProjectionTelling(caches),
      clock: Date.now,
    });
    try {
      await log.append([registered('w1', { memoryTotal: 1024 ** 4, maxContainers: 0 })], null)
        .committed;
      const shellMetrics = new RouterMetrics({
        state: () => log.state,
        inFlight: () => 0,
        sessionsWaiting: () => 0,
      });
      const options: CallPathOptions = {
        journal: new Journal(log, shellMetrics, createLogger('silent'), () => undefined),
        placement: caches,
        turns: new SessionTurns(),
        workers: answeringWorkers(),
        active: new ActiveCalls(),
        config: DEFAULT_CONFIG,
        clock: Date.now,
        logger: createLogger('info', pino.destination({ dest: '/dev/null', sync: true })),
        metrics: shellMetrics,
      };
      let shellBest = Infinity;
      for (let run = 0; run < 3; run += 1) {
        collectGarbage();
        const start = cpuUs();
        await shellCalls(options, CALLS / 4, run * CALLS);
        await log.flushed();
        shellBest = Math.min(shellBest, cpuUs() - start);
      }
      const shellUs = Math.round((shellBest / (CALLS / 4)) * 10) / 10;
      if (shellOnly) return { callShellUs: shellUs };
      const placeOnly = await perCallUs((index) => {
        decideCall(log.state, {
          call: { requestId: `p${index}`, sessionId: null, tenantId: 'bench', demand: demand() },
          caches,
        });
      });
      const appends = await perCallUs(
        (index) => {
          const requestId = `r${index}`;
          const call = { requestId, sessionId: null, tenantId: 'bench', demand: demand() };
          const decision = decideCall(log.state, { call, caches });
          log.append(decision.events, causeText(decision.cause));
          const placed = decision.placement;
          if (placed.outcome !== 'placed') throw new Error('the benchmark call was not placed');
          const ids = { ...placedIds(requestId, null, placed), containerId: `c${index}` };
          const bound = decideBound(log.state, { requestId, sessionId: null, placed, ids });
          log.append(bound.events, causeText(bound.cause));
          const end = decideCallEnd(log.state, { requestId, code: null });
          log.append(end.events, causeText(end.cause));
        },
        () => log.flushed(),
      );
      // The same three appends each in its own turn, as a call's come: one transaction each.
      let spreadBest = Infinity;
      for (let run = 0; run < 3; run += 1) {
        collectGarbage();
        const start = cpuUs();
        for (let index = 0; index < CALLS / 4; index += 1) {
          const requestId = `t${run}-${index}`;
          const call = { requestId, sessionId: null, tenantId: 'bench', demand: demand() };
          const decision = decideCall(log.state, { call, caches });
          log.append(decision.events, causeText(decision.cause));
          await new Promise((resolve) => setImmediate(resolve));
          const placed = decision.placement;
          if (placed.outcome !== 'placed') throw new Error('the benchmark call was not placed');
          const ids = { ...placedIds(requestId, null, placed), containerId: `d${index}` };
          const bound = decideBound(log.state, { requestId, sessionId: null, placed, ids });
          log.append(bound.events, causeText(bound.cause));
          await new Promise((resolve) => setImmediate(resolve));
          const end = decideCallEnd(log.state, { requestId, code: null });
          log.append(end.events, causeText(end.cause));
          await new Promise((resolve) => setImmediate(resolve));
        }
        await log.flushed();
        spreadBest = Math.min(spreadBest, cpuUs() - start);
      }
      const spreadAppends = Math.round((spreadBest / (CALLS / 4)) * 10) / 10;

      const logger = createLogger('info', pino.destination({ dest: '/dev/null', sync: true }));
      const logging = await perCallUs((index) => {
        const ids = { requestId: `l${index}`, sessionId: null, tenantId: 'bench' };
        const call = callLogger(logger, { ...ids, workerId: 'w1' });
        call.info(
          {
            code: 'OK',
            containerId: 'c1',
            checkpointId: null,
            pinned: false,
            memory: 1024 * 1024,
            ms: 1,
            bytesToWorker: 64,
            bytesToClient: 64,
          },
          'call finished',
        );
      });

      const metrics = new RouterMetrics({
        state: () => log.state,
        inFlight: () => 0,
        sessionsWaiting: () => 0,
      });
      const counting = await perCallUs(() => {
        metrics.placements.inc();
        metrics.relayBytesToWorker.inc(64);
        metrics.relayBytesToClient.inc(64);
        metrics.finished.inc({ code: 'OK' });
        for (let append = 0; append < 3; append += 1) metrics.appendLatency.observe(0.0002);
      });
      const share = (us: number) => Math.round((us / routerCpuUs) * 1000) / 1000;
      const pieces = spreadAppends + logging + counting;
      return {
        calls: CALLS,
        routerCpuPerCallUs: routerCpuUs,
        callShellUs: shellUs,
        placementUs: placeOnly,
        threeAppendsUs: appends,
        threeAppendsEachInItsTurnUs: spreadAppends,
        appendsWithoutPlacementUs: Math.round((spreadAppends - placeOnly) * 10) / 10,
        loggerUs: logging,
        metricsUs: counting,
        machineAndShellUs: Math.round((shellUs - pieces) * 10) / 10,
        shareOfRouterCpu: {
          callShell: share(shellUs),
          placement: share(placeOnly),
          appendsWithoutPlacement: share(spreadAppends - placeOnly),
          logger: share(logging),
          metrics: share(counting),
          machineAndShell: share(shellUs - pieces),
          transportAndAuth: share(routerCpuUs - shellUs),
        },
        note:
          'in-process, no transport: callShellUs runs whole calls through CallRelay (the ' +
          "core's machine, a real journal on LMDB, logs to /dev/null, metrics) with ends that " +
          'answer at once, ' +
          `${CALLS / 4} calls one after another, each step in its own event-loop turn; ` +
          'threeAppendsUs decides (placement, binding, finish) and appends each to a real LMDB ' +
          'log in one loop (lmdb batches them), threeAppendsEachInItsTurnUs the same with every ' +
          'append in its own turn (its own transaction, as in the router); all CPU time of the ' +
          'process (every thread); machineAndShell = callShell less the pieces; ' +
          'appendsWithoutPlacement uses the per-turn figure; ' +
          "transportAndAuth = the router's CPU per call less callShell (HTTP/2 on both " +
          'legs, framing, the token check, the LMDB commit thread)',
      };
    } finally {
      await log.close();
    }
  });
}
