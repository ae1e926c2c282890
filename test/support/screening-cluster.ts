/**
 * The screening tier of examples/screening for end-to-end tests, every part real: `readie router`
 * and three `readie worker` processes (template backend) with a tokens file naming two tenants,
 * an operator and the workers, and the catalogue make_catalogue.py generates (the weights of each
 * version on disk). Tenants' calls run through examples/screening/judge.py with Debian's Python.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials as grpcCredentials, type ServiceError } from '@grpc/grpc-js';
import { AdminServiceClient } from '../../src/proto/gen/readie/v1/admin.js';
import type { PinChange, PinStatusResponse } from '../../src/proto/gen/readie/v1/pins.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { freePort } from './e2e-cluster.js';
import { PYTHON } from './python.js';
import { ROOT } from './replay.js';
import { bearer } from './router/harness.js';
import { tempDir } from './temp.js';

/** One answer of judge.py. */
export interface Judged {
  readonly text: string;
  readonly version?: string;
  readonly verdict?: string;
  readonly served_version: string;
  readonly routing_revision?: number;
  readonly request_id: string;
  readonly retry_of?: string;
  readonly worker_id?: string;
  readonly error?: string;
  readonly details?: string;
}

/** A running screening tier. */
export interface ScreeningCluster {
  readonly dir: string;
  readonly logDir: string;
  readonly address: string;
  readonly workerIds: readonly string[];
  /** Runs judge.py as `tenant` over `texts`; resolves with its answers. */
  judge(tenant: string, texts: readonly string[], parallel?: number): Promise<Judged[]>;
  stage(tenantId: string, version: string, k: number): Promise<PinChange>;
  flip(tenantId: string, force?: boolean): Promise<PinChange>;
  rollback(tenantId: string): Promise<PinChange>;
  status(): Promise<PinStatusResponse>;
  /** Waits until the staged version of `tenantId` is resident on its whole subset. */
  prewarmed(tenantId: string, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const TENANTS = ['acme', 'globex'];
const token = (name: string) => `${name}-token-${'0123456789abcdef'.repeat(2)}`;

function daemon(args: readonly string[], logFile: string): ChildProcess {
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'readie.js'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, READIE_AUTH_TOKEN: '' },
  });
  closeSync(fd);
  return child;
}

function unary<Res>(
  send: (callback: (error: ServiceError | null, response: Res) => void) => unknown,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    send((error, response) => (error ? reject(error) : resolve(response))),
  );
}

/**
 * Starts the tier: versions `versions` (with `loadSeconds` making some slow to load), three
 * workers with room for `residentVersions` versions each, and `env` settings for the router.
 */
export async function startScreeningCluster(options: {
  readonly versions: readonly string[];
  readonly loadSeconds?: Readonly<Record<string, number>>;
  readonly env?: Readonly<Record<string, string>>;
}): Promise<ScreeningCluster> {
  const dir = tempDir('readie-screening-');
  const workerIds = ['s1', 's2', 's3'];
  const tokens = [
    ...TENANTS.map((tenant) => `tenant ${tenant} ${tokenDigest(token(tenant))}`),
    `operator ops ${tokenDigest(token('ops'))}`,
    ...workerIds.map((id) => `worker ${id} ${tokenDigest(token(id))}`),
  ];
  writeFileSync(join(dir, 'tokens'), `${tokens.join('\n')}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'router.token'), `${token('router')}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'router.sha256'), `${tokenDigest(token('router'))}\n`, { mode: 0o600 });
  for (const id of workerIds)
    writeFileSync(join(dir, `${id}.token`), `${token(id)}\n`, { mode: 0o600 });
  const made = spawnSync(
    PYTHON,
    [
      join(ROOT, 'examples', 'screening', 'make_catalogue.py'),
      '--weights-dir',
      join(dir, 'weights'),
      '--versions',
      options.versions.join(','),
      ...Object.entries(options.loadSeconds ?? {}).flatMap(([v, s]) => [
        '--load-seconds',
        `${v}=${s}`,
      ]),
    ],
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`make_catalogue.py failed: ${made.stderr}`);
  const catalogue = join(dir, 'catalogue.json');
  writeFileSync(catalogue, made.stdout);
  const routerPort = await freePort();
  const address = `127.0.0.1:${routerPort}`;
  const logDir = join(dir, 'log');
  const router = daemon(
    [
      'router',
      '--listen',
      address,
      '--log',
      logDir,
      '--insecure',
      '--catalogue',
      catalogue,
      '--tokens-file',
      join(dir, 'tokens'),
      '--router-token-file',
      join(dir, 'router.token'),
      '--reaper-interval',
      '1s',
      ...Object.entries(options.env ?? {}).flatMap(([name, value]) => [
        `--${name.toLowerCase().replaceAll('_', '-')}`,
        value,
      ]),
    ],
    join(dir, 'router.log'),
  );
  const workers = await Promise.all(
    workerIds.map(async (id) =>
      daemon(
        [
          'worker',
          '--router',
          address,
          '--listen',
          `127.0.0.1:${await freePort()}`,
          '--id',
          id,
          '--flavor',
          'cpu',
          '--state-dir',
          join(dir, 'workers', id),
          '--catalogue',
          catalogue,
          '--python',
          PYTHON,
          '--insecure',
          '--restore-backend',
          'template',
          '--memory',
          '2GiB',
          '--resident-memory',
          '256MiB',
          '--standby',
          '0',
          '--token-file',
          join(dir, `${id}.token`),
          '--router-token-file',
          join(dir, 'router.sha256'),
        ],
        join(dir, `${id}.log`),
      ),
    ),
  );
  const admin = new AdminServiceClient(address, grpcCredentials.createInsecure());
  const metadata = () => bearer(token('ops'));
  const status = () =>
    unary<PinStatusResponse>((cb) => admin.pinStatus({ tenantId: '' }, metadata(), cb));
  const stop = async () => {
    admin.close();
    for (const worker of workers) worker.kill('SIGTERM');
    await Promise.all(
      workers.map(
        (w) =>
          new Promise((resolve) => (w.exitCode !== null ? resolve(null) : w.once('exit', resolve))),
      ),
    );
    router.kill('SIGTERM');
    await new Promise((resolve) =>
      router.exitCode !== null ? resolve(null) : router.once('exit', resolve),
    );
  };
  const run = (tenant: string, texts: readonly string[], parallel = 1): Promise<Judged[]> =>
    new Promise((resolve, reject) => {
      const child = spawn(
        PYTHON,
        [join(ROOT, 'examples', 'screening', 'judge.py'), '--parallel', String(parallel), ...texts],
        {
          env: {
            PATH: process.env['PATH'] ?? '/usr/bin:/bin',
            HOME: dir,
            READIE_ADDRESS: address,
            READIE_INSECURE: '1',
            READIE_AUTH_TOKEN: token(tenant),
            PYTHONPATH: join(ROOT, 'python'),
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      let err = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      child.on('exit', (code) => {
        if (code !== 0) reject(new Error(`judge.py exited ${code}: ${err}`));
        else
          resolve(
            out
              .split('\n')
              .filter(Boolean)
              .map((line) => JSON.parse(line) as Judged),
          );
      });
    });
  try {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const live = await status().then(
        (answer) => answer.workers.filter((w) => w.residentMemory !== undefined).length,
        () => 0,
      );
      if (live === workerIds.length) break;
      if (Date.now() > deadline) {
        throw new Error(
          `the workers did not all register: ${readFileSync(join(dir, 'router.log'), 'utf8').slice(-2000)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    dir,
    logDir,
    address,
    workerIds,
    judge: run,
    stage: (tenantId, version, k) =>
      unary<{ change?: PinChange }>((cb) =>
        admin.stagePin({ tenantId, version, k, force: false }, metadata(), cb),
      ).then((answer) => answer.change as PinChange),
    flip: (tenantId, force = false) =>
      unary<{ change?: PinChange }>((cb) =>
        admin.flipPin({ tenantId, force }, metadata(), cb),
      ).then((answer) => answer.change as PinChange),
    rollback: (tenantId) =>
      unary<{ change?: PinChange }>((cb) => admin.rollbackPin({ tenantId }, metadata(), cb)).then(
        (answer) => answer.change as PinChange,
      ),
    status,
    prewarmed: async (tenantId, timeoutMs = 90_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const staged = (await status()).staged.find((pin) => pin.tenantId === tenantId);
        if (staged?.ready === true) return;
        if (Date.now() > deadline)
          throw new Error(`the pre-warm of ${tenantId} did not finish: ${JSON.stringify(staged)}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    stop,
  };
}
