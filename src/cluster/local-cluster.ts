/**
 * `readie up`: a router and N workers on loopback, as real child processes of this one, with the
 * event log, catalogue, worker state and process logs under one state directory (`.readie/`).
 * Ready once the router's log shows every worker registered after this start; `stop` asks the
 * workers to leave (they report removed and let running calls finish, however long that takes),
 * then stops the router (which flushes its log).
 *
 * Every run makes fresh credentials (`local-credentials.ts`): the router takes the tokens file and
 * its own token, each worker its own token and the router's digest, and clients the client token.
 *
 * Each child runs in its own process group, so a Ctrl-C at the terminal reaches only this process,
 * which then stops the children once, in order. Should this process exit before they have stopped
 * (an uncaught error, `process.exit` on a second Ctrl-C), its exit handler sends each child still
 * running SIGTERM: a worker already leaving takes that as "exit without waiting".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventLog, EventLogError } from '../events/index.js';
import { defaultCatalogue } from './default-catalogue.js';
import { writeLocalCredentials, type LocalCredentials } from './local-credentials.js';

const BIN = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How to start the local cluster. */
export interface LocalClusterOptions {
  readonly workers: number;
  readonly stateDir: string;
  /** The router's port on 127.0.0.1. */
  readonly port: number;
  /** Each worker's port on 127.0.0.1 (default: the ports after the router's). */
  readonly workerPorts?: readonly number[];
  /** Worker ids (default `worker-1` ... `worker-N`). */
  readonly workerIds?: readonly string[];
  /**
   * IDs of workers the caller runs itself (a benchmark's scripted worker): they get credentials
   * (`credentials.workerTokenFiles`) but no process.
   */
  readonly externalWorkerIds?: readonly string[];
  readonly python: string;
  readonly numpy: boolean;
  /** Memory each worker offers, e.g. `4GiB` (default: the worker's own default). */
  readonly workerMemory?: string;
  /** Further flags for every worker, e.g. `['--wheel-dir', dir]`. */
  readonly workerArgs?: readonly string[];
  /** How long to wait for every worker to register, in ms. */
  readonly readyTimeout: number;
  /** Extra environment for the router and workers (settings by env name). */
  readonly env?: Readonly<Record<string, string>>;
  /** Aborting it while the workers register stops the cluster and rejects. */
  readonly signal?: AbortSignal;
}

/** A started local cluster. */
export interface LocalCluster {
  readonly address: string;
  readonly workerIds: readonly string[];
  /** Each worker's process, by worker id. */
  readonly workerProcesses: ReadonlyMap<string, ChildProcess>;
  readonly logDir: string;
  /** This run's credentials: the client token to print, the operator's, and their files. */
  readonly credentials: LocalCredentials;
  /**
   * Asks the workers to leave and waits, with no time limit, until they have (running calls
   * finish); then stops the router. Resolves when all have exited.
   */
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

/**
 * Credential settings a user's shell may hold (a client token exported from an earlier run, say):
 * the children take their credentials from this run's files alone.
 */
const CREDENTIAL_ENV = [
  'READIE_AUTH_TOKEN',
  'WORKER_AUTH',
  'WORKER_TOKEN_FILE',
  'WORKER_ROUTER_TOKEN_FILE',
];

function childEnv(env: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const inherited = { ...process.env };
  for (const name of CREDENTIAL_ENV) delete inherited[name];
  return { ...inherited, ...env };
}

function start(
  name: string,
  args: readonly string[],
  logFile: string,
  env: Readonly<Record<string, string>>,
): Member {
  const fd = openSync(logFile, 'a', 0o600);
  chmodSync(logFile, 0o600);
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    stdio: ['ignore', fd, fd],
    env: childEnv(env),
    // Its own process group: the terminal's Ctrl-C goes to `readie up` alone, which stops the
    // children once and in order (a worker takes a second signal as "exit without waiting").
    detached: true,
  });
  closeSync(fd);
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { name, process: child, exited, logFile };
}

function running(member: Member): boolean {
  return member.process.exitCode === null && member.process.signalCode === null;
}

/** The local cluster could not start: a process died, a worker errored, time ran out. */
export class LocalClusterError extends Error {
  override readonly name = 'LocalClusterError';
}

/** The last `seq` of the event log in `logDir`, or 0 if there is none yet. */
export async function lastSeqOf(logDir: string): Promise<number> {
  let log: EventLog;
  try {
    log = EventLog.open(logDir, { readOnly: true });
  } catch (error) {
    if (error instanceof EventLogError) return 0;
    throw error;
  }
  try {
    return log.lastSeq;
  } finally {
    await log.close();
  }
}

/**
 * Waits until the router's log shows each of `workerIds` registered ready after `afterSeq` (or
 * one of them registered with an error). Registrations up to `afterSeq` belong to an earlier run
 * that used the same log and say nothing about the processes just started.
 */
export async function waitForWorkers(
  logDir: string,
  workerIds: readonly string[],
  afterSeq: number,
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
  const waiting = new Set(workerIds);
  try {
    for await (const event of log.follow(afterSeq + 1, abort.signal)) {
      if (event.type !== 'WorkerRegistered' || !waiting.has(event.workerId)) continue;
      if (event.status === 'error')
        throw new LocalClusterError(
          `worker ${event.workerId} registered with an error: ${event.error ?? 'no reason given'}`,
        );
      waiting.delete(event.workerId);
      if (waiting.size === 0) return;
    }
  } finally {
    clearTimeout(timer);
    await log.close();
  }
  if (stopped) throw new LocalClusterError(stopped);
  throw new LocalClusterError(
    `workers ${[...waiting].join(', ')} did not register within ${Math.round(timeoutMs / 1000)}s`,
  );
}

/** Starts the router and the workers and waits until every worker is registered. */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const stateDir = resolve(options.stateDir);
  const logDir = resolve(stateDir, 'log');
  const logsDir = resolve(stateDir, 'logs');
  // Everything under the state directory is root's alone: logs name sessions, the log holds them.
  for (const dir of [stateDir, logsDir]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  const catalogue = resolve(stateDir, 'catalogue.json');
  writeFileSync(catalogue, `${JSON.stringify(defaultCatalogue(options.numpy), null, 2)}\n`, {
    mode: 0o600,
  });
  chmodSync(catalogue, 0o600);
  const address = `127.0.0.1:${options.port}`;
  const env = { ...options.env };
  const workerIds =
    options.workerIds ?? Array.from({ length: options.workers }, (_, i) => `worker-${i + 1}`);
  const afterSeq = await lastSeqOf(logDir);
  const credentials = writeLocalCredentials(stateDir, [
    ...workerIds,
    ...(options.externalWorkerIds ?? []),
  ]);
  const router = start(
    'router',
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
      credentials.tokensFile,
      '--router-token-file',
      credentials.routerTokenFile,
    ],
    resolve(logsDir, 'router.log'),
    env,
  );
  const workers = workerIds.map((id, i) =>
    start(
      id,
      [
        'worker',
        '--router',
        address,
        '--listen',
        `127.0.0.1:${options.workerPorts?.[i] ?? options.port + 1 + i}`,
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
        '--token-file',
        credentials.workerTokenFiles.get(id)!,
        '--router-token-file',
        credentials.routerDigestFile,
        // Containers see none of the cluster's state: the router's log, the logs, other workers',
        // and the run's credentials.
        '--hide',
        stateDir,
        ...(options.workerMemory ? ['--memory', options.workerMemory] : []),
        ...(options.workerArgs ?? []),
      ],
      resolve(logsDir, `${id}.log`),
      env,
    ),
  );
  const members = [router, ...workers];
  // Detached children outlive this process unless told: on any exit that did not stop them.
  const orphaned = () => {
    for (const member of members) if (running(member)) member.process.kill('SIGTERM');
  };
  process.on('exit', orphaned);
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
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      for (const worker of workers) if (running(worker)) worker.process.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
      if (running(router)) router.process.kill('SIGTERM');
      await router.exited;
      process.off('exit', orphaned);
    })());
  try {
    const interrupted = new Promise<string>((done) => {
      if (options.signal?.aborted) done('interrupted while the workers registered');
      options.signal?.addEventListener('abort', () =>
        done('interrupted while the workers registered'),
      );
    });
    const ended = Promise.race([failed, interrupted]);
    await waitForWorkers(logDir, workerIds, afterSeq, options.readyTimeout, ended);
  } catch (error) {
    await stop();
    throw error;
  }
  const workerProcesses = new Map(workers.map((w) => [w.name, w.process]));
  return { address, workerIds, workerProcesses, logDir, credentials, stop, failed };
}
