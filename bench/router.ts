/**
 * The router hop, measured against calling the worker directly, in the same run:
 * - small calls (a 64-byte echo): p50/p99 latency one call at a time, and calls/s with 1, 16 and
 *   64 in flight, through the router to a scripted echo worker, beside the same calls straight to
 *   it; the CPU each hop's process spends per call (from /proc), in microseconds;
 * - bandwidth: a 256 MiB payload in 1 MiB chunks up to the worker (it counts the bytes), and
 *   256 MiB down from it, through the router beside straight to the worker.
 * Two bare relays, none of the router's work, show what a hop itself costs: `bareH2` on the
 * router's own HTTP/2 transport (so the router's work reads as router / bareH2), `bare` on grpc-js
 * with the router's codec (the first relay's transport); nginx relaying gRPC (`grpc_pass`, one
 * worker process, plaintext like the others) is the peer a router hop is measured against.
 * `hotPath` (router-hot-path.ts) measures the router's own work per call piece by piece.
 * The router is the real `readie router` command and the worker a real grpc-js server, each in
 * its own process, as in production (on this 2-core machine they share the cores with the
 * client). The router authenticates as in production: a tokens file naming the benchmark's tenant
 * and worker, its own token for the worker. Rounds rotate the paths because this machine's speed
 * drifts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
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
import { measureHotPath } from './router-hot-path.js';
import {
  collectGarbage,
  perSecond,
  ratio,
  withTempDir,
  percentile,
  waitServing,
} from './support.js';

/** The benchmark's credentials: its client's tenant token, its worker's, the router's own. */
const TENANT_TOKEN = 'bench-tenant-token-0123456789abcdef';
const WORKER_TOKEN = 'bench-worker-token-0123456789abcdef';
const ROUTER_TOKEN = 'bench-router-token-0123456789abcdef';

const SMALL_CALLS = 1_500;
const CONCURRENT_CALLS = 3_000;
const CONCURRENCY = [1, 16, 64] as const;
const ROUNDS = 3;
const MiB = 1024 * 1024;
const BIG_PAYLOAD = 256 * MiB;

type Stream = ClientDuplexStream<
  RequestExecutionRequest | ExecuteRequest,
  RequestExecutionResponse | ExecuteResponse
>;

/** One way of making a call: through the router, a bare relay, nginx, or straight to the worker. */
type PathName = 'router' | 'bareH2' | 'bare' | 'nginx' | 'direct';
const PATHS: readonly PathName[] = ['router', 'bareH2', 'bare', 'nginx', 'direct'];

interface Path {
  readonly name: PathName;
  open(): Stream;
  first(requestId: string): RequestExecutionRequest | ExecuteRequest;
}

function proxyPath(name: 'router' | 'bare' | 'bareH2', address: string): Path & { close(): void } {
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
          function: '',
        },
      },
    }),
    close: () => client.close(),
  };
}

function directPath(name: 'direct' | 'nginx', address: string): Path & { close(): void } {
  const client = new ExecutionServiceClient(address, credentials.createInsecure());
  return {
    name,
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
          tenantId: '',
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

/** CPU time (user + system) of `pid` and its children, in ms, from /proc (10 ms ticks). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  const own = (target: number): number => {
    try {
      const stat = readFileSync(`/proc/${target}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      return 0;
    }
  };
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    children = [];
  }
  return own(pid) + children.reduce((sum, child) => sum + own(child), 0);
}

/** nginx relaying gRPC from `port` to the worker, plaintext, one worker process. */
function nginxConfig(dir: string, port: number, workerAddress: string): string {
  return [
    'worker_processes 1;',
    `pid ${join(dir, 'nginx.pid')};`,
    `error_log ${join(dir, 'nginx-error.log')} warn;`,
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    `  upstream worker { server ${workerAddress}; keepalive 64; }`,
    '  server {',
    `    listen 127.0.0.1:${port} http2;`,
    '    location / {',
    '      grpc_pass grpc://worker;',
    '      grpc_read_timeout 1h;',
    '      grpc_send_timeout 1h;',
    '      client_max_body_size 0;',
    '      client_body_timeout 1h;',
    '    }',
    '  }',
    '}',
  ].join('\n');
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
    let bareH2: ChildProcess | undefined;
    let nginx: ChildProcess | undefined;
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
      bareH2 = spawn(
        process.execPath,
        ['--import', 'tsx', root('scripts/bare-h2-relay.ts'), workerAddress, '0'],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const bareH2Address = (await firstLine(bareH2, /^listening /)).split(' ')[1]!;
      const nginxPort = await freePort();
      const nginxConf = join(dir, 'nginx.conf');
      writeFileSync(nginxConf, nginxConfig(dir, nginxPort, workerAddress));
      nginx = spawn('nginx', ['-p', dir, '-c', nginxConf, '-g', 'daemon off;'], {
        stdio: 'ignore',
      });
      await waitServing(routerAddress, 600);
      await waitServing(`127.0.0.1:${nginxPort}`, 600);
      await register(routerAddress, workerAddress);
      const paths: Record<PathName, Path & { close(): void }> = {
        router: proxyPath('router', routerAddress),
        bareH2: proxyPath('bareH2', bareH2Address),
        bare: proxyPath('bare', bareAddress),
        nginx: directPath('nginx', `127.0.0.1:${nginxPort}`),
        direct: directPath('direct', workerAddress),
      };
      const pids: Record<PathName, number | undefined> = {
        router: router.pid,
        bareH2: bareH2.pid,
        bare: bare.pid,
        nginx: nginx.pid,
        direct: undefined,
      };
      const order = PATHS.map((name) => paths[name]);
      const rotation = (round: number) => [
        ...order.slice(round % order.length),
        ...order.slice(0, round % order.length),
      ];

      // Warm up every path (connections, JIT).
      for (const path of order) await latencies(path, 300);

      const perPath = <T>(make: () => T) =>
        Object.fromEntries(PATHS.map((name) => [name, make()])) as Record<PathName, T>;
      const samples = perPath(() => [] as number[]);
      const throughput = Object.fromEntries(
        CONCURRENCY.map((level) => [level, perPath(() => [] as number[])]),
      ) as Record<number, Record<PathName, number[]>>;
      const cpu = perPath(() => ({ ms: 0, calls: 0 }));
      const up = perPath(() => [] as number[]);
      const down = perPath(() => [] as number[]);
      for (let round = 0; round < ROUNDS; round += 1) {
        for (const path of rotation(round)) {
          collectGarbage();
          samples[path.name].push(...(await latencies(path, SMALL_CALLS / ROUNDS)));
          for (const level of CONCURRENCY) {
            collectGarbage();
            const calls = CONCURRENT_CALLS / ROUNDS;
            const before = cpuMs(pids[path.name]);
            throughput[level]![path.name].push(await throughputMs(path, calls, level));
            if (level === 16) {
              cpu[path.name].ms += cpuMs(pids[path.name]) - before;
              cpu[path.name].calls += calls;
            }
          }
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
      const latencyOf = perPath(() => ({ p50Ms: 0, p99Ms: 0 }));
      for (const name of PATHS) latencyOf[name] = latency(name);
      const rates = Object.fromEntries(
        CONCURRENCY.map((level) => {
          const figures = perPath(() => 0);
          for (const name of PATHS) {
            figures[name] = perSecond(
              CONCURRENT_CALLS / ROUNDS,
              Math.min(...throughput[level]![name]),
            );
          }
          return [
            `inFlight${level}`,
            {
              ...figures,
              routerVsDirect: ratio(figures.router, figures.direct),
              nginxVsDirect: ratio(figures.nginx, figures.direct),
              bareH2VsDirect: ratio(figures.bareH2, figures.direct),
              bareVsDirect: ratio(figures.bare, figures.direct),
            },
          ];
        }),
      );
      const mbPerSecond = (ms: readonly number[]) =>
        Math.round(((BIG_PAYLOAD / 1e6) * 1000) / Math.min(...ms));
      const mbps = (runs: Record<PathName, number[]>) => {
        const figures = perPath(() => 0);
        for (const name of PATHS) figures[name] = mbPerSecond(runs[name]);
        return {
          ...figures,
          routerVsDirect: ratio(figures.router, figures.direct),
          nginxVsDirect: ratio(figures.nginx, figures.direct),
          bareH2VsDirect: ratio(figures.bareH2, figures.direct),
          bareVsDirect: ratio(figures.bare, figures.direct),
        };
      };
      const cpuPerCall = (name: PathName) =>
        Math.round((cpu[name].ms * 1000) / Math.max(1, cpu[name].calls));
      const routerCpuUs = cpuPerCall('router');
      const hotPath = await measureHotPath(routerCpuUs);
      const { p50Ms: routerP50, p99Ms: routerP99 } = latencyOf.router;
      return {
        smallCalls: {
          payloadBytes: SMALL.length,
          oneAtATime: {
            calls: SMALL_CALLS,
            ...latencyOf,
            p50RouterVsDirect: ratio(routerP50, latencyOf.direct.p50Ms),
            p99RouterVsDirect: ratio(routerP99, latencyOf.direct.p99Ms),
            p50RouterVsNginx: ratio(routerP50, latencyOf.nginx.p50Ms),
            p50NginxVsDirect: ratio(latencyOf.nginx.p50Ms, latencyOf.direct.p50Ms),
            p50BareH2VsDirect: ratio(latencyOf.bareH2.p50Ms, latencyOf.direct.p50Ms),
            p50BareVsDirect: ratio(latencyOf.bare.p50Ms, latencyOf.direct.p50Ms),
          },
          callsPerSecond: { calls: CONCURRENT_CALLS, ...rates },
          cpuPerCallUs: {
            inFlight: 16,
            router: routerCpuUs,
            bareH2: cpuPerCall('bareH2'),
            bare: cpuPerCall('bare'),
            nginx: cpuPerCall('nginx'),
            routerVsNginx: ratio(routerCpuUs, cpuPerCall('nginx')),
          },
        },
        bandwidth: {
          payloadMiB: BIG_PAYLOAD / MiB,
          uploadMBps: mbps(up),
          downloadMBps: mbps(down),
        },
        hotPath,
        targets: {
          p50RouterVsDirectAtMost: 1.5,
          p50RouterVsNginxAtMost: 1,
          callsPerSecond16RouterVsDirectAtLeast: 0.8,
          bandwidthRouterVsDirectAtLeast: 0.8,
        },
        note:
          'router = the readie router command (LMDB event log in the temp dir, info logs to ' +
          "/dev/null); bareH2 = a relay on the router's HTTP/2 transport and no other work; " +
          'bare = a grpc-js relay with the router codec and no other work; nginx = ' +
          'grpc_pass, one worker process; worker = a scripted grpc-js echo worker; each in its ' +
          'own process; client in the benchmark process; all on loopback, plaintext; latency ' +
          `from ${SMALL_CALLS} sequential calls per path, calls/s best of ${ROUNDS} alternating ` +
          'rounds, bandwidth best of 2; CPU per call from /proc over the 16-in-flight rounds ' +
          '(10 ms ticks)',
      };
    } finally {
      const children = [
        router,
        worker,
        ...[bare, bareH2, nginx].filter((child) => child !== undefined),
      ];
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
