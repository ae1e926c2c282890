/**
 * `readie up`: a router and N workers on loopback, as real child processes of this one, with the
 * event log, catalogue, worker state and process logs under one state directory (`.readie/`).
 * Ready once the router's log shows every worker registered; Ctrl-C stops workers first (they
 * report removed and let running calls finish), then the router (which flushes its log).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, writeFileSync, closeSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventLog, EventLogError } from '../events/index.js';
import { clusterProjection, initialState, type ClusterState } from '../projections/index.js';
import { defaultCatalogue } from './default-catalogue.js';

const BIN = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How to start the local cluster. */
export interface LocalClusterOptions {
  readonly workers: number;
  readonly stateDir: string;
  /** The router's port on 127.0.0.1; workers take the next ones. */
  readonly port: number;
  readonly python: string;
  readonly numpy: boolean;
  /** Memory each worker offers, e.g. `4GiB` (default: the worker's own default). */
  readonly workerMemory?: string;
  /** How long to wait for every worker to register, in ms. */
  readonly readyTimeout: number;
  /** Extra environment for the router and workers (settings by env name). */
  readonly env?: Readonly<Record<string, string>>;
}

/** A started local cluster. */
export interface LocalCluster {
  readonly address: string;
  readonly workerIds: readonly string[];
  readonly logDir: string;
  /** Stops workers, then the router; resolves when all have exited. */
  stop(): Promise<void>;
  /** Resolves with a description when a process exits before `stop` was called. */
  readonly failed: Promise<string>;
}

/** A process the cluster started, with its log file. */
interface Member {
  readonly name: string;
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
  readonly logFile: string;
}

function start(
  name: string,
  args: readonly string[],
  logFile: string,
  env: Record<string, string>,
): Member {
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, ...env },
  });
  closeSync(fd);
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { name, process: child, exited, logFile };
}

/** The local cluster could not start: a process died, a worker errored, time ran out. */
export class LocalClusterError extends Error {
  override readonly name = 'LocalClusterError';
}

/** Waits until the router's log shows `workerIds` ready (or one of them in error). */
export async function waitForWorkers(
  logDir: string,
  workerIds: readonly string[],
  timeoutMs: number,
  failed: Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const abort = new AbortController();
  let log: EventLog | undefined;
  // Open the log only once the router has written to it: a log it is still creating may lack
  // its databases.
  while (!log) {
    try {
      const opened = EventLog.open(logDir, { readOnly: true, pollInterval: 100 });
      if (opened.lastSeq > 0) log = opened;
      else await opened.close();
    } catch (error) {
      if (!(error instanceof EventLogError) || Date.now() > deadline) throw error;
    }
    if (!log) {
      if (Date.now() > deadline)
        throw new LocalClusterError(`the router wrote nothing to ${logDir}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const timer = setTimeout(() => abort.abort(), Math.max(0, deadline - Date.now()));
  let stopped: string | undefined;
  void failed.then((why) => {
    stopped = why;
    abort.abort();
  });
  let state: ClusterState = initialState();
  try {
    for await (const event of log.follow(0, abort.signal)) {
      state = clusterProjection.apply(state, event);
      const workers = workerIds.map((id) => state.workers.get(id));
      const broken = workers.find((w) => w?.status === 'error');
      if (broken)
        throw new LocalClusterError(
          `worker ${broken.workerId} registered with an error: ${broken.error ?? 'no reason given'}`,
        );
      if (workers.every((w) => w?.status === 'ready')) return;
    }
  } finally {
    clearTimeout(timer);
    await log.close();
  }
  if (stopped) throw new LocalClusterError(stopped);
  const missing = workerIds.filter((id) => state.workers.get(id)?.status !== 'ready');
  throw new LocalClusterError(
    `workers ${missing.join(', ')} did not register within ${Math.round(timeoutMs / 1000)}s`,
  );
}

/** Waits for `work`, at most `ms` (the timer does not keep the process alive afterwards). */
async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise((done) => (timer = setTimeout(done, ms)))]);
  clearTimeout(timer);
}

/** Starts the router and the workers and waits until every worker is registered. */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const stateDir = resolve(options.stateDir);
  const logDir = resolve(stateDir, 'log');
  const logsDir = resolve(stateDir, 'logs');
  mkdirSync(logsDir, { recursive: true });
  const catalogue = resolve(stateDir, 'catalogue.json');
  writeFileSync(catalogue, `${JSON.stringify(defaultCatalogue(options.numpy), null, 2)}\n`);
  const address = `127.0.0.1:${options.port}`;
  const env = { ...options.env };
  const router = start(
    'router',
    ['router', '--listen', address, '--log', logDir, '--insecure', '--catalogue', catalogue],
    resolve(logsDir, 'router.log'),
    env,
  );
  const workerIds = Array.from({ length: options.workers }, (_, i) => `worker-${i + 1}`);
  const workers = workerIds.map((id, i) =>
    start(
      id,
      [
        'worker',
        '--router',
        address,
        '--listen',
        `127.0.0.1:${options.port + 1 + i}`,
        '--id',
        id,
        '--flavor',
        'cpu',
        '--state-dir',
        resolve(stateDir, 'workers', id),
        '--catalogue',
        catalogue,
        '--python',
        options.python,
        '--insecure',
        ...(options.workerMemory ? ['--memory', options.workerMemory] : []),
      ],
      resolve(logsDir, `${id}.log`),
      env,
    ),
  );
  const members = [router, ...workers];
  let stopping = false;
  const failed = Promise.race(
    members.map((member) =>
      member.exited.then((code) =>
        stopping
          ? new Promise<string>(() => undefined)
          : `${member.name} exited (code ${code}); see ${member.logFile}`,
      ),
    ),
  );
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    for (const worker of workers) worker.process.kill('SIGTERM');
    await within(Promise.all(workers.map((w) => w.exited)), 30_000);
    for (const worker of workers) worker.process.kill('SIGKILL');
    router.process.kill('SIGTERM');
    await within(router.exited, 15_000);
    router.process.kill('SIGKILL');
  };
  try {
    await waitForWorkers(logDir, workerIds, options.readyTimeout, failed);
  } catch (error) {
    await stop();
    throw error;
  }
  return { address, workerIds, logDir, stop, failed };
}
