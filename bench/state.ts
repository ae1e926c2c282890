/**
 * What the router remembers per call, and whether it forgets it: 20,000 small tenant calls, each
 * in a fresh session that the client then ends (`TenantService.EndSession`), through a real
 * router (the `startRouter` shell in this process: real LMDB log, real gRPC on loopback, tokens
 * auth naming the tenant) to a scripted echo worker in its own process. Figures:
 * - `router`: the benchmark process's heap after a full GC (router plus an idle client), before
 *   the calls (the baseline), once they have run (remembered), and after the router's clock moves
 *   past every retention (`SESSION_RETENTION`, `PIN_RETENTION`) and one heartbeat and one call
 *   arrive (forgotten): per remembered call, and growth once forgotten;
 * - `projection`: the same log folded alone (`clusterProjection`, as the router folds it) up to
 *   the last call, and to its end: heap per remembered call and once forgotten, beside the state
 *   folded up to the first of these calls (its baseline);
 * - `log`: bytes the log holds (JSONL text, snapshots included) per small call in a fresh session,
 *   beside a small call outside sessions measured in the same run.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, type ClientDuplexStream } from '@grpc/grpc-js';
import { EventLog, encodeEvent, type ClusterEvent } from '../src/events/index.js';
import { clusterProjection, type ClusterState } from '../src/projections/index.js';
import { PayloadFormat } from '../src/proto/gen/readie/v1/call.js';
import {
  ProxyServiceClient,
  type RequestExecutionRequest,
  type RequestExecutionResponse,
} from '../src/proto/gen/readie/v1/proxy.js';
import {
  Flavor,
  RegistryServiceClient,
  WorkerStatus,
} from '../src/proto/gen/readie/v1/registry.js';
import { TenantServiceClient } from '../src/proto/gen/readie/v1/tenant.js';
import { createLogger, startRouter } from '../src/router/index.js';
import { bearerMetadata } from '../src/router/security/index.js';
import { DEFAULT_CONFIG, type Config } from '../src/shared/config.js';
import { collectGarbage, ratio, withTempDir } from './support.js';

const TENANT_TOKEN = 'bench-tenant-token-0123456789abcdef';
const WORKER_TOKEN = 'bench-worker-token-0123456789abcdef';
const ROUTER_TOKEN = 'bench-router-token-0123456789abcdef';
const CALLS = 20_000;
const PLAIN_CALLS = 2_000;
const WARMUP = 300;
const IN_FLIGHT = 16;
const HOUR = 3_600_000;

type Stream = ClientDuplexStream<RequestExecutionRequest, RequestExecutionResponse>;

const SMALL = Buffer.from(`echo ${'x'.repeat(59)}`);

function heapUsed(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

/** This process's resident memory from /proc, bytes: anonymous (heap and more) and file-backed (the log's map). */
function resident(): { anon: number; file: number } {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { anon: kib('RssAnon') * 1024, file: kib('RssFile') * 1024 };
}

function firstLine(stdout: NodeJS.ReadableStream, pattern: RegExp): Promise<string> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: stdout });
    lines.on('line', (line) => {
      if (pattern.test(line)) resolve(line);
    });
  });
}

/** Runs the state benchmark. */
export async function run() {
  return withTempDir(async (dir) => {
    const root = (path: string) => fileURLToPath(new URL(path, import.meta.url));
    const worker = spawn(
      process.execPath,
      ['--import', 'tsx', root('scripts/echo-worker.ts'), 'w1'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const workerAddress = (await firstLine(worker.stdout, /^listening /)).split(' ')[1]!;
    writeFileSync(
      join(dir, 'tokens'),
      `tenant bench ${TENANT_TOKEN}\nworker w1 ${WORKER_TOKEN}\n`,
      {
        mode: 0o600,
      },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER_TOKEN, { mode: 0o600 });
    // The router's clock: real time, plus however far the benchmark moves it on.
    let skew = 0;
    const clock = () => Date.now() + skew;
    const config: Config = {
      ...DEFAULT_CONFIG,
      PROBE_INTERVAL: HOUR,
      REAPER_INTERVAL: HOUR,
      WORKER_TTL: 24 * HOUR,
    };
    const logDir = join(dir, 'log');
    const router = await startRouter({
      listen: '127.0.0.1:0',
      logDir,
      security: { kind: 'insecure' },
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
      logger: createLogger('silent'),
      version: 'bench',
      config,
      clock,
    });
    const proxy = new ProxyServiceClient(router.address, credentials.createInsecure());
    const tenant = new TenantServiceClient(router.address, credentials.createInsecure());
    const registry = new RegistryServiceClient(router.address, credentials.createInsecure());
    const tenantAuth = bearerMetadata(TENANT_TOKEN);
    const workerAuth = bearerMetadata(WORKER_TOKEN);
    const report = (): Promise<void> =>
      new Promise((resolve, reject) =>
        registry.reportUtilization(
          {
            workerId: 'w1',
            memoryUsed: 0,
            containerCount: 0,
            cpuUsed: 0,
            cpuTotal: 2,
            gpuMemoryUsed: 0,
            instanceId: '',
            reportSeq: 0,
            containers: [],
            standbys: [],
          },
          workerAuth,
          (error) => (error ? reject(error) : resolve()),
        ),
      );
    let callNumber = 0;
    const call = (sessionId: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const stream = proxy.requestExecution(tenantAuth.clone()) as Stream;
        stream.on('data', () => undefined);
        stream.on('error', reject);
        stream.on('status', (status: { code: number }) => {
          if (status.code === 0) resolve();
        });
        stream.write({
          message: {
            $case: 'config',
            value: {
              requestId: `bench-${(callNumber += 1)}`,
              sessionId,
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
        });
        stream.write({ message: { $case: 'chunk', value: { data: SMALL } } });
        stream.end();
      });
    const endSession = (sessionId: string): Promise<void> =>
      new Promise((resolve, reject) =>
        tenant.endSession({ sessionId }, tenantAuth, (error) =>
          error ? reject(error) : resolve(),
        ),
      );
    /** `count` calls, `IN_FLIGHT` at a time; each in a fresh session (then ended) when `sessions`. */
    const calls = async (count: number, sessions: boolean, prefix: string): Promise<void> => {
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < count) {
            next += 1;
            const sessionId = sessions ? `${prefix}-${next}` : '';
            await call(sessionId);
            if (sessions) await endSession(sessionId);
          }
        }),
      );
    };
    try {
      await new Promise<void>((resolve, reject) =>
        registry.reportStatus(
          {
            workerId: 'w1',
            address: workerAddress,
            status: WorkerStatus.WORKER_STATUS_READY,
            error: '',
            flavor: Flavor.FLAVOR_CPU,
            memoryTotal: 1024 ** 4,
            maxContainers: 0,
            gpuMemoryTotal: 0,
            checkpoints: [],
            instanceId: '',
            reportSeq: 0,
            containers: [],
            pythonVersion: '3.11.2',
            restoreBackend: 'template',
          },
          workerAuth,
          (error) => (error ? reject(error) : resolve()),
        ),
      );
      // Warm up (connections, JIT), then let what the warm-up remembered be forgotten too.
      await calls(WARMUP, true, 'warm');
      skew += 3 * HOUR;
      await report();
      await call('');
      const lastWarmSeq = router.state.lastSeq;

      // Small calls outside sessions: the log's baseline.
      await calls(PLAIN_CALLS, false, '');
      const lastPlainSeq = router.state.lastSeq;

      const baseline = heapUsed();
      const rssBaseline = resident();
      const sessionsBefore = router.state.sessions.size;
      await calls(CALLS, true, 'fresh');
      const lastCallSeq = router.state.lastSeq;
      const remembered = heapUsed();
      const rssRemembered = resident();
      const sessionsRemembered = router.state.sessions.size;
      const tenantCallsRemembered = router.state.routing.calls.size;

      // Past every retention: a heartbeat and one call are all the router hears.
      skew += 3 * HOUR;
      await report();
      await call('');
      const forgotten = heapUsed();
      const rssForgotten = resident();
      const sessionsLeft = router.state.sessions.size;
      const tenantCallsLeft = router.state.routing.calls.size;

      proxy.close();
      tenant.close();
      registry.close();
      await router.close(500);

      // The log the router wrote, read back.
      const log = EventLog.open(logDir, { readOnly: true });
      const events: ClusterEvent[] = [];
      try {
        for (const event of log.read()) events.push(event);
      } finally {
        await log.close();
      }
      const bytesBetween = (from: number, to: number) => {
        let bytes = 0;
        for (const event of events) {
          if (event.seq > from && event.seq <= to) bytes += encodeEvent(event).length + 1;
        }
        return bytes;
      };
      const perCallByType = (from: number, to: number, count: number) => {
        const bytes: Record<string, number> = {};
        for (const event of events) {
          if (event.seq <= from || event.seq > to) continue;
          bytes[event.type] = (bytes[event.type] ?? 0) + encodeEvent(event).length + 1;
        }
        return Object.fromEntries(
          Object.entries(bytes).map(([type, total]) => [type, Math.round(total / count)]),
        );
      };
      const plainBytesPerCall = bytesBetween(lastWarmSeq, lastPlainSeq) / PLAIN_CALLS;
      const sessionBytesPerCall = bytesBetween(lastPlainSeq, lastCallSeq) / CALLS;

      // The fold alone, as the router keeps it, over the same events.
      const foldTo = (last: number): ClusterState => {
        let state = clusterProjection.initial();
        for (const event of events) {
          if (event.seq > last) break;
          state = clusterProjection.apply(state, event);
        }
        return state;
      };
      const foldedHeap = (last: number) => {
        const before = heapUsed();
        const state = foldTo(last);
        const after = heapUsed();
        // Keep the state alive across the measurement.
        if (state.lastSeq < 0) throw new Error('unreachable');
        return after - before;
      };
      const foldBase = foldedHeap(lastPlainSeq);
      const foldRemembered = foldedHeap(lastCallSeq);
      const foldForgotten = foldedHeap(events.at(-1)?.seq ?? lastCallSeq);

      const perCall = (bytes: number) => Math.round(bytes / CALLS);
      const mb = (bytes: number) => Math.round(bytes / 1e4) / 100;
      return {
        calls: CALLS,
        inFlight: IN_FLIGHT,
        router: {
          heapBaselineMB: mb(baseline),
          growthRememberedMB: mb(remembered - baseline),
          bytesPerRememberedCall: perCall(remembered - baseline),
          growthForgottenMB: mb(forgotten - baseline),
          forgottenVsRemembered: ratio(forgotten - baseline, remembered - baseline),
          rssAnonMB: {
            baseline: mb(rssBaseline.anon),
            remembered: mb(rssRemembered.anon),
            forgotten: mb(rssForgotten.anon),
          },
          rssFileMB: {
            baseline: mb(rssBaseline.file),
            remembered: mb(rssRemembered.file),
            forgotten: mb(rssForgotten.file),
          },
          sessions: { before: sessionsBefore, remembered: sessionsRemembered, left: sessionsLeft },
          tenantCalls: { remembered: tenantCallsRemembered, left: tenantCallsLeft },
        },
        projection: {
          stateBeforeCallsMB: mb(foldBase),
          bytesPerRememberedCall: perCall(foldRemembered - foldBase),
          growthForgottenMB: mb(foldForgotten - foldBase),
          forgottenVsRemembered: ratio(foldForgotten - foldBase, foldRemembered - foldBase),
        },
        log: {
          bytesPerSessionCall: Math.round(sessionBytesPerCall),
          bytesPerPlainCall: Math.round(plainBytesPerCall),
          sessionVsPlain: ratio(sessionBytesPerCall, plainBytesPerCall),
          sessionCallBytesByType: perCallByType(lastPlainSeq, lastCallSeq, CALLS),
        },
        targets: { growthForgottenMBAtMost: 50, logBytesPerSmallCallAtMost: 2048 },
        note:
          'router = startRouter in this process (LMDB log in a temp dir, tokens auth, silent ' +
          'logs) and a scripted echo worker in its own process; heap of this process after two ' +
          'full GCs (router plus idle clients); each call is a 64-byte echo in a fresh session ' +
          `that the client ends; ${IN_FLIGHT} in flight; "forgotten" = the router clock moved ` +
          '3 h on (past SESSION_RETENTION and PIN_RETENTION), then one heartbeat and one call; ' +
          'projection = the recorded log folded alone (clusterProjection); log bytes = JSONL ' +
          'text of every event appended for the calls, snapshots included',
      };
    } finally {
      worker.kill('SIGTERM');
      await new Promise((resolve) =>
        worker.exitCode !== null ? resolve(null) : worker.once('exit', resolve),
      );
    }
  });
}
