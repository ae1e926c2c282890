/**
 * The router hop, measured against calling the worker directly, in the same run:
 * - small calls (a 64-byte echo): p50/p99 latency one call at a time, and calls/s with 16 in
 *   flight, through the router to a scripted echo worker, beside the same calls straight to it;
 * - bandwidth: a 256 MiB payload in 1 MiB chunks up to the worker (it counts the bytes), and
 *   256 MiB down from it, through the router beside straight to the worker.
 * A third path, a bare grpc-js relay (the router's codec and backpressure, none of its work),
 * shows what the hop itself costs, so the router's own overhead reads as router / bare relay.
 * The router is the real `readie router` command and the worker a real grpc-js server, each in
 * its own process, as in production (on this 2-core machine they share the cores with the
 * client). The router authenticates as in production: a tokens file naming the benchmark's tenant
 * and worker, its own token for the worker. Rounds rotate the paths because this machine's speed
 * drifts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import { PayloadFormat } from '../src/proto/gen/readie/v1/call.js';
import {
  ExecutionServiceClient,
  type ExecuteRequest,
  type ExecuteResponse,
} from '../src/proto/gen/readie/v1/execution.js';
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
import { bearerMetadata } from '../src/router/security/index.js';
import { HealthClient } from '../src/router/workers/index.js';
import { collectGarbage, perSecond, ratio, withTempDir, percentile } from './support.js';

/** The benchmark's credentials: its client's tenant token, its worker's, the router's own. */
const TENANT_TOKEN = 'bench-tenant-token-0123456789abcdef';
const WORKER_TOKEN = 'bench-worker-token-0123456789abcdef';
const ROUTER_TOKEN = 'bench-router-token-0123456789abcdef';

const SMALL_CALLS = 1_500;
const CONCURRENT_CALLS = 3_000;
const CONCURRENCY = 16;
const ROUNDS = 3;
const MiB = 1024 * 1024;
const BIG_PAYLOAD = 256 * MiB;

type Stream = ClientDuplexStream<
  RequestExecutionRequest | ExecuteRequest,
  RequestExecutionResponse | ExecuteResponse
>;

/** One way of making a call: through the router, or straight to the worker. */
type PathName = 'router' | 'bare' | 'direct';

interface Path {
  readonly name: PathName;
  open(): Stream;
  first(requestId: string): RequestExecutionRequest | ExecuteRequest;
}

function proxyPath(name: 'router' | 'bare', address: string): Path & { close(): void } {
  const client = new ProxyServiceClient(address, credentials.createInsecure());
  const metadata = bearerMetadata(TENANT_TOKEN);
  return {
    name,
    open: () => client.requestExecution(metadata.clone()) as Stream,
    first: (requestId) => ({
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
        },
      },
    }),
    close: () => client.close(),
  };
}

function directPath(address: string): Path & { close(): void } {
  const client = new ExecutionServiceClient(address, credentials.createInsecure());
  return {
    name: 'direct',
    open: () => client.execute(new Metadata()) as Stream,
    first: (requestId) => ({
      message: {
        $case: 'header',
        value: {
          ids: {
            requestId,
            sessionId: '',
            workerId: 'w1',
            containerId: '',
            checkpointId: '',
            version: '',
            routingRevision: 0,
          },
          memory: 1024 * 1024,
          gpu: false,
          imports: [],
          packages: [],
          pythonVersion: '3.11.2',
          format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
          version: '',
          coldLoad: false,
          routingRevision: 0,
        },
      },
    }),
    close: () => client.close(),
  };
}

let callNumber = 0;

/** One call: the first message, `payload` chunks, half-close; resolves with bytes answered. */
function call(path: Path, payload: (stream: Stream) => Promise<void> | void): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = path.open();
    let answered = 0;
    stream.on('data', (answer: RequestExecutionResponse) => {
      if (answer.message?.$case === 'chunk') answered += answer.message.value.data.length;
    });
    stream.on('error', reject);
    stream.on('status', (status: { code: number }) => {
      if (status.code === 0) resolve(answered);
    });
    stream.write(path.first(`bench-${(callNumber += 1)}`));
    Promise.resolve(payload(stream)).then(
      () => stream.end(),
      (error: unknown) => reject(error as Error),
    );
  });
}

const SMALL = Buffer.from(`echo ${'x'.repeat(59)}`);

function smallCall(path: Path): Promise<number> {
  return call(path, (stream) => {
    stream.write({ message: { $case: 'chunk', value: { data: SMALL } } });
  });
}

/** Writes `total` bytes in 1 MiB chunks after a command chunk, respecting backpressure. */
async function upload(stream: Stream, total: number): Promise<void> {
  stream.write({ message: { $case: 'chunk', value: { data: Buffer.from('count') } } });
  const data = Buffer.alloc(MiB, 1);
  for (let sent = 0; sent < total; sent += MiB) {
    if (!stream.write({ message: { $case: 'chunk', value: { data } } })) {
      await new Promise((resolve) => stream.once('drain', resolve));
    }
  }
}

async function latencies(path: Path, calls: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < calls; i += 1) {
    const start = performance.now();
    await smallCall(path);
    times.push(performance.now() - start);
  }
  return times;
}

async function throughputMs(path: Path, calls: number, concurrency: number): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) {
        next += 1;
        await smallCall(path);
      }
    }),
  );
  return performance.now() - start;
}

async function uploadMs(path: Path): Promise<number> {
  const start = performance.now();
  await call(path, (stream) => upload(stream, BIG_PAYLOAD));
  return performance.now() - start;
}

async function downloadMs(path: Path): Promise<number> {
  const start = performance.now();
  const bytes = await call(path, (stream) => {
    stream.write({
      message: {
        $case: 'chunk',
        value: { data: Buffer.from(`stream ${BIG_PAYLOAD / MiB} ${MiB}`) },
      },
    });
  });
  if (bytes !== BIG_PAYLOAD) throw new Error(`downloaded ${bytes} bytes, not ${BIG_PAYLOAD}`);
  return performance.now() - start;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

function firstLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      if (pattern.test(line)) resolve(line);
    });
    child.on('exit', (code) => reject(new Error(`child exited (${code}) before ${pattern}`)));
  });
}

async function waitServing(address: string): Promise<void> {
  const health = new HealthClient(address, credentials.createInsecure());
  try {
    for (let attempt = 0; attempt < 600; attempt += 1) {
      const serving = await new Promise<boolean>((resolve) =>
        health.check({ service: '' }, new Metadata(), { deadline: Date.now() + 1_000 }, (e, r) =>
          resolve(!e && r?.status === 'SERVING'),
        ),
      );
      if (serving) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`router at ${address} never served`);
  } finally {
    health.close();
  }
}

function register(routerAddress: string, workerAddress: string): Promise<void> {
  const registry = new RegistryServiceClient(routerAddress, credentials.createInsecure());
  return new Promise((resolve, reject) =>
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
      bearerMetadata(WORKER_TOKEN),
      (error) => {
        registry.close();
        if (error) reject(error);
        else resolve();
      },
    ),
  );
}

/** A file of `dir` holding `text`, 0600. */
function secret(dir: string, name: string, text: string): string {
  writeFileSync(join(dir, name), text, { mode: 0o600 });
  return join(dir, name);
}

/** Runs the router benchmark. */
export async function run() {
  return withTempDir(async (dir) => {
    const root = (path: string) => fileURLToPath(new URL(path, import.meta.url));
    const worker = spawn(process.execPath, ['--import', 'tsx', root('scripts/echo-worker.ts')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const port = await freePort();
    const routerAddress = `127.0.0.1:${port}`;
    let bare: ChildProcess | undefined;
    const router = spawn(
      process.execPath,
      [
        root('../bin/readie.js'),
        'router',
        '--listen',
        routerAddress,
        '--log',
        join(dir, 'log'),
        '--insecure',
        '--tokens-file',
        secret(dir, 'tokens', `tenant bench ${TENANT_TOKEN}\nworker w1 ${WORKER_TOKEN}\n`),
        '--router-token-file',
        secret(dir, 'router.token', ROUTER_TOKEN),
      ],
      { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, WORKER_TTL: '1h' } },
    );
    try {
      const workerAddress = (await firstLine(worker, /^listening /)).split(' ')[1]!;
      bare = spawn(
        process.execPath,
        ['--import', 'tsx', root('scripts/bare-relay.ts'), workerAddress, '0'],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const bareAddress = (await firstLine(bare, /^listening /)).split(' ')[1]!;
      await waitServing(routerAddress);
      await register(routerAddress, workerAddress);
      const paths = {
        router: proxyPath('router', routerAddress),
        bare: proxyPath('bare', bareAddress),
        direct: directPath(workerAddress),
      };
      const order = [paths.router, paths.bare, paths.direct];
      const rotation = (round: number) => [...order.slice(round % 3), ...order.slice(0, round % 3)];

      // Warm up every path (connections, JIT).
      for (const path of order) await latencies(path, 300);

      const empty = () => ({
        router: [] as number[],
        bare: [] as number[],
        direct: [] as number[],
      });
      const samples = empty();
      const throughput = empty();
      const up = empty();
      const down = empty();
      for (let round = 0; round < ROUNDS; round += 1) {
        for (const path of rotation(round)) {
          collectGarbage();
          samples[path.name].push(...(await latencies(path, SMALL_CALLS / ROUNDS)));
          collectGarbage();
          throughput[path.name].push(
            await throughputMs(path, CONCURRENT_CALLS / ROUNDS, CONCURRENCY),
          );
        }
      }
      for (let round = 0; round < 2; round += 1) {
        for (const path of rotation(round)) {
          collectGarbage();
          up[path.name].push(await uploadMs(path));
          collectGarbage();
          down[path.name].push(await downloadMs(path));
        }
      }
      for (const path of order) path.close();

      const latency = (name: PathName) => {
        const sorted = [...samples[name]].sort((a, b) => a - b);
        return {
          p50Ms: Math.round(percentile(sorted, 0.5) * 1000) / 1000,
          p99Ms: Math.round(percentile(sorted, 0.99) * 1000) / 1000,
        };
      };
      const callsPerSecond = (name: PathName) =>
        perSecond(CONCURRENT_CALLS / ROUNDS, Math.min(...throughput[name]));
      const mbPerSecond = (ms: readonly number[]) =>
        Math.round(((BIG_PAYLOAD / 1e6) * 1000) / Math.min(...ms));
      const viaRouter = latency('router');
      const viaBare = latency('bare');
      const direct = latency('direct');
      const rates = {
        router: callsPerSecond('router'),
        bare: callsPerSecond('bare'),
        direct: callsPerSecond('direct'),
      };
      const mbps = (runs: ReturnType<typeof empty>) => {
        const figures = {
          router: mbPerSecond(runs.router),
          bare: mbPerSecond(runs.bare),
          direct: mbPerSecond(runs.direct),
        };
        return {
          ...figures,
          routerVsDirect: ratio(figures.router, figures.direct),
          bareVsDirect: ratio(figures.bare, figures.direct),
        };
      };
      return {
        smallCalls: {
          payloadBytes: SMALL.length,
          oneAtATime: {
            calls: SMALL_CALLS,
            router: viaRouter,
            bareRelay: viaBare,
            direct,
            p50RouterVsDirect: ratio(viaRouter.p50Ms, direct.p50Ms),
            p99RouterVsDirect: ratio(viaRouter.p99Ms, direct.p99Ms),
            p50BareVsDirect: ratio(viaBare.p50Ms, direct.p50Ms),
            p50RouterVsBare: ratio(viaRouter.p50Ms, viaBare.p50Ms),
          },
          concurrent: {
            calls: CONCURRENT_CALLS,
            inFlight: CONCURRENCY,
            callsPerSecond: rates,
            routerVsDirect: ratio(rates.router, rates.direct),
            bareVsDirect: ratio(rates.bare, rates.direct),
          },
        },
        bandwidth: {
          payloadMiB: BIG_PAYLOAD / MiB,
          uploadMBps: mbps(up),
          downloadMBps: mbps(down),
        },
        targets: {
          p50RatioAtMost: 1.5,
          bandwidthRatioAtLeast: 0.7,
        },
        note:
          'router = the readie router command (event log in the temp dir, info logs to ' +
          '/dev/null); bare = a grpc-js relay with the router codec and no other work; worker = ' +
          'a scripted grpc-js echo worker; each in its own process; client in the benchmark ' +
          'process; all on loopback; latency from ' +
          `${SMALL_CALLS} sequential calls per path, throughput best of ${ROUNDS} alternating rounds, ` +
          'bandwidth best of 2',
      };
    } finally {
      const children = [router, worker, ...(bare ? [bare] : [])];
      for (const child of children) child.kill('SIGTERM');
      await Promise.all(
        children.map(
          (child) =>
            new Promise((resolve) =>
              child.exitCode !== null ? resolve(null) : child.once('exit', resolve),
            ),
        ),
      );
    }
  });
}
