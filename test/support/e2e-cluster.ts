/**
 * A whole cluster for end-to-end tests, every part real: nginx (Debian's) terminating TLS in
 * front of the router, with deploy/nginx.conf as its config; the router and two workers started
 * by the code behind `readie up`; clients reaching nginx over TLS with a bearer token.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { join } from 'node:path';
import { startLocalCluster } from '../../src/cluster/local-cluster.js';
import { buildWheel, PYTHON } from './python.js';
import { ROOT } from './replay.js';
import { tempDir } from './temp.js';

/**
 * A TCP port free on 127.0.0.1 now, for a listener started next: below the kernel's ephemeral
 * range, as `freePortRun` picks them. A port the kernel hands out (`listen(0)`) is an ephemeral
 * one, which any outgoing connection may take before the listener binds it: with another suite
 * running beside this one, a worker of the e2e cluster failed to start so (port in use, exit 2).
 */
export function freePort(): Promise<number> {
  return freePortRun(1);
}

/** Whether a listener can bind `port` on loopback now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The first of `count` consecutive ports free now (`readie up --port P` takes P and the ports
 * after it), below the kernel's ephemeral range: there only listeners take ports, whereas any
 * outgoing connection of another process may take an ephemeral one between this check and the
 * bind (a worker of `readie up` failed to start so, with another suite running beside it).
 */
export async function freePortRun(count: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const base = 20_000 + Math.floor(Math.random() * (32_000 - 20_000 - count));
    let free = true;
    for (let port = base; free && port < base + count; port += 1) free = await bindable(port);
    if (free) return base;
  }
  throw new Error(`no ${count} consecutive free ports between 20000 and 32000`);
}

async function listening(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** deploy/nginx.conf with its addresses, files and TLS material pointed at the test's. */
export function nginxConfig(dir: string, listenPort: number, routerPort: number): string {
  const tls = join(ROOT, 'test', 'support', 'tls');
  const original = readFileSync(join(ROOT, 'deploy', 'nginx.conf'), 'utf8');
  // `readie up`'s router serves plaintext on loopback: the upstream is grpc:// (the file's
  // comment says so), without the grpc_ssl_* lines.
  const replacements: [RegExp, string][] = [
    [/^pid .*;$/m, `pid ${join(dir, 'nginx.pid')};`],
    [/^error_log .*;$/m, `error_log ${join(dir, 'error.log')} warn;`],
    [/^(\s*)access_log .*;$/m, `$1access_log ${join(dir, 'access.log')};`],
    [/^(\s*)server router\.example\.internal:50051;$/m, `$1server 127.0.0.1:${routerPort};`],
    [/grpc_pass grpcs:\/\/readie_router;/, 'grpc_pass grpc://readie_router;'],
    [/^\s*(# The router's certificate.*|grpc_ssl_.*;)\n/gm, ''],
    [/^(\s*)listen 443 ssl http2;$/m, `$1listen 127.0.0.1:${listenPort} ssl http2;`],
    [/^(\s*)ssl_certificate .*;$/m, `$1ssl_certificate ${join(tls, 'server.pem')};`],
    [/^(\s*)ssl_certificate_key .*;$/m, `$1ssl_certificate_key ${join(tls, 'server-key.pem')};`],
  ];
  let config = original;
  for (const [pattern, replacement] of replacements) {
    if (!pattern.test(config)) throw new Error(`deploy/nginx.conf no longer has ${pattern}`);
    config = config.replace(pattern, replacement);
  }
  return config;
}

/** A running end-to-end cluster. */
export interface E2eCluster {
  readonly dir: string;
  readonly logDir: string;
  readonly token: string;
  /** The token of a worker, one of `externalWorkerIds` for one the caller runs. */
  workerToken(workerId: string): string;
  /** The address clients use: nginx. */
  readonly address: string;
  readonly routerPort: number;
  /** Each worker's process, by worker id. */
  readonly workers: ReadonlyMap<string, ChildProcess>;
  /** The environment of a Python client script (TLS to nginx, the token, the package path). */
  clientEnv(overrides?: Record<string, string>): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts the router and two workers as `readie up` does (startLocalCluster, with its credentials,
 * a wheel directory and quick probes), then nginx in front; resolves when both workers are registered and
 * nginx listens.
 */
export async function startE2eCluster(
  options: {
    readonly externalWorkerIds?: readonly string[];
    /** More settings for the router and workers (by env name), over the quick probes'. */
    readonly env?: Readonly<Record<string, string>>;
    /** More `KIND NAME TOKEN-DIGEST` lines for the router's tokens file (more tenants). */
    readonly extraTokens?: string;
  } = {},
): Promise<E2eCluster> {
  const dir = tempDir('readie-e2e-');
  const wheels = buildWheel(
    dir,
    'readie_e2e_demo',
    'def greet():\n    return "hello from a wheel"\n',
  );
  const routerPort = await freePort();
  const local = await startLocalCluster({
    workers: 2,
    workerIds: ['e2e-w1', 'e2e-w2'],
    externalWorkerIds: options.externalWorkerIds ?? [],
    stateDir: dir,
    port: routerPort,
    workerPorts: [await freePort(), await freePort()],
    python: PYTHON,
    numpy: spawnSync(PYTHON, ['-c', 'import numpy']).status === 0,
    workerMemory: '4GiB',
    workerArgs: ['--wheel-dir', wheels],
    readyTimeout: 60_000,
    env: {
      PROBE_INTERVAL: '500ms',
      PROBE_TIMEOUT: '500ms',
      PROBE_FAILURE_THRESHOLD: '2',
      REAPER_INTERVAL: '500ms',
      WORKER_UTILIZATION_INTERVAL: '1s',
      WORKER_TTL: '10s',
      ...options.env,
    },
    ...(options.extraTokens === undefined ? {} : { extraTokens: options.extraTokens }),
  });
  // The client token this run of the cluster made (tenant "local").
  const token = local.credentials.clientToken;
  let nginx: ChildProcess | undefined;
  const stop = async () => {
    nginx?.kill('SIGTERM');
    await local.stop();
  };
  let nginxPort = 0;
  try {
    const nginxDir = join(dir, 'nginx');
    mkdirSync(nginxDir, { recursive: true });
    nginxPort = await freePort();
    const nginxConf = join(nginxDir, 'nginx.conf');
    writeFileSync(nginxConf, nginxConfig(nginxDir, nginxPort, routerPort));
    nginx = spawn('nginx', ['-p', nginxDir, '-c', nginxConf, '-g', 'daemon off;'], {
      stdio: 'ignore',
    });
    await listening(nginxPort);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    dir,
    logDir: local.logDir,
    token,
    workerToken: (workerId) => {
      const file = local.credentials.workerTokenFiles.get(workerId);
      if (file === undefined) throw new Error(`no credentials for worker ${workerId}`);
      return readFileSync(file, 'utf8').trim();
    },
    address: `127.0.0.1:${nginxPort}`,
    routerPort,
    workers: local.workerProcesses,
    clientEnv: (overrides = {}) => ({
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: dir,
      READIE_ADDRESS: `127.0.0.1:${nginxPort}`,
      READIE_CA_FILE: join(ROOT, 'test', 'support', 'tls', 'ca.pem'),
      READIE_AUTH_TOKEN: token,
      PYTHONPATH: join(ROOT, 'python'),
      ...overrides,
    }),
    stop,
  };
}
