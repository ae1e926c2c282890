/**
 * `readie up`: a router and N workers on loopback, as real child processes of this one, with the
 * event log, catalogue, worker state and process logs under one state directory (`.readie/`).
 * With `log: 'jetstream'` the log is a stream on a three-node NATS cluster this starts too
 * (`local-nats.ts`), with a leading and a standby router on it and every worker given both
 * routers' addresses: a router that dies is replaced by the other, and the cluster carries on.
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
import {
  chmodSync,
  closeSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  writeFileSync,
} from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_CLUSTER_WAIT_MS,
  EventLogError,
  JetStreamUnavailableError,
  openEventLog,
  type EventLogBackend,
} from '../events/index.js';
import type { Catalogue } from '../events/catalogue.js';
import { healthStatus } from '../net/health-client.js';
import { RegistryServiceClient } from '../proto/gen/readie/v1/registry.js';
import { defaultCatalogue } from './default-catalogue.js';
import { writeLocalAddress } from './local-address.js';
import { writeLocalCredentials, type LocalCredentials } from './local-credentials.js';
import { LOCAL_STREAM, startLocalNats } from './local-nats.js';
import type { NatsCluster } from './nats-cluster.js';

/** Where the local cluster keeps its event log. */
export type LocalLogBackend = 'lmdb' | 'jetstream';

const BIN = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How to start the local cluster. */
export interface LocalClusterOptions {
  readonly workers: number;
  readonly stateDir: string;
  /** The router's port on 127.0.0.1 (with `jetstream`, the standby router's is the next one). */
  readonly port: number;
  /** The log's backend (default `lmdb`: a directory under the state directory). */
  readonly log?: LocalLogBackend;
  /** The `nats-server` binary for `jetstream` (default `nats-server` on PATH). */
  readonly natsServer?: string;
  /** Each worker's port on 127.0.0.1 (default: the ports after the routers'). */
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
  /** The catalogue in force (default: a bare checkpoint, and a numpy one with `numpy`). */
  readonly catalogue?: Catalogue;
  /**
   * More credentials for the router's tokens file: `KIND NAME TOKEN` lines (tenants, operators),
   * checked by the caller, appended after this run's own.
   */
  readonly extraTokens?: string;
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
  /**
   * Told when a router exits while another still runs (the cluster carries on: a standby takes
   * over); never while stopping.
   */
  readonly onRouterLost?: (message: string) => void;
}

/** A started local cluster. */
export interface LocalCluster {
  /** The first router's address (with `jetstream`, the one started to lead). */
  readonly address: string;
  /** Every router's address (one with `lmdb`; the leader's and the standby's with `jetstream`). */
  readonly addresses: readonly string[];
  /** Each router's process, by router ID (`router` with `lmdb`; `router-a`, `router-b`). */
  readonly routerProcesses: ReadonlyMap<string, ChildProcess>;
  /** The NATS cluster the log is on (`jetstream` only). */
  readonly nats: NatsCluster | undefined;
  readonly workerIds: readonly string[];
  /** Each worker's process, by worker id. */
  readonly workerProcesses: ReadonlyMap<string, ChildProcess>;
  /** Where the event log is: the LMDB directory, or the `nats://…/readie` stream. */
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

/** The last line of the file at `path` (read from its last 4 KiB: a log may be large), if any. */
function lastLine(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    const tail = Buffer.alloc(Math.min(size, 4096));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    return tail.toString('utf8').trimEnd().split('\n').at(-1);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * How `member` ended, for a message: its exit code and the one-line reason a readie command
 * prints before it exits (`readie router: cannot listen on …`), when its log ends with one.
 */
function howItEnded(member: Member, code: number | null, who = member.name): string {
  const how = code === null ? `signal ${member.process.signalCode ?? 'unknown'}` : `code ${code}`;
  const last = lastLine(member.logFile);
  const reason = last === undefined ? undefined : /^readie [a-z]+: (.+)$/.exec(last)?.[1];
  return `${who} exited (${how})${reason ? `: ${reason}` : ''}; see ${member.logFile}`;
}

function running(member: Member): boolean {
  return member.process.exitCode === null && member.process.signalCode === null;
}

/** The local cluster could not start: a process died, a worker errored, time ran out. */
export class LocalClusterError extends Error {
  override readonly name = 'LocalClusterError';
}

/**
 * The last `seq` of the event log at `location` (a directory or a stream), or 0 if there is none
 * yet. A NATS cluster still electing is waited for as a router waits (`DEFAULT_CLUSTER_WAIT_MS`);
 * one that never answers is an error, not an empty log (earlier runs' registrations would then
 * count as this run's).
 */
export async function lastSeqOf(location: string): Promise<number> {
  let log: EventLogBackend;
  try {
    log = await openEventLog(location, { readOnly: true, waitMs: DEFAULT_CLUSTER_WAIT_MS });
  } catch (error) {
    if (error instanceof EventLogError && !(error instanceof JetStreamUnavailableError)) return 0;
    throw error;
  }
  try {
    return log.lastSeq;
  } finally {
    await log.close();
  }
}

/** The service whose health the router reports SERVING once it has recovered from its log. */
const ROUTER_SERVICE = RegistryServiceClient.serviceName;

/**
 * Whether the router at `address` serves now: `undefined` when it does, else what it answered
 * (or why nothing did), for a message. Something else that holds the port (a program that is not
 * a router, a router of another cluster that is still starting) does not answer SERVING.
 */
async function notServing(address: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const status = await healthStatus(address, ROUTER_SERVICE, timeoutMs);
    return status === 'SERVING' ? undefined : `it answers ${status}`;
  } catch (error) {
    return (error as { details?: string }).details ?? String(error);
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
  routers: readonly string[],
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const abort = new AbortController();
  let stopped: string | undefined;
  void failed.then((why) => {
    stopped = why;
    abort.abort();
  });
  const seconds = Math.round(timeoutMs / 1000);
  // The log is opened once a router serves (of several on a JetStream log, the one that leads):
  // a router has created its log by then. An open while it creates the log can make LMDB forget
  // one of its first commits (and the router then never starts), or fail on a half-made file
  // (docs/event-log.md); a port that merely accepts connections (another program holds it, and
  // the router is about to exit) says nothing. The one handle is kept: `follow` picks up what
  // the router writes. A router (or worker) that exits meanwhile ends the wait with why.
  for (;;) {
    const answers = await Promise.all(routers.map((address) => notServing(address, 1_000)));
    if (stopped) throw new LocalClusterError(stopped);
    if (answers.some((why) => why === undefined)) break;
    if (Date.now() > deadline) {
      const [only] = routers.length === 1 ? answers : [];
      throw new LocalClusterError(
        only !== undefined
          ? `the router did not serve at ${routers[0]} within ${seconds}s (last: ${only})`
          : `no router served at ${routers.join(' or ')} within ${seconds}s (last: ${routers.map((address, i) => `${address}: ${answers[i]}`).join('; ')})`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let log: EventLogBackend | undefined;
  while (!log) {
    if (stopped) throw new LocalClusterError(stopped);
    try {
      log = await openEventLog(logDir, { readOnly: true, pollInterval: 100 });
    } catch (error) {
      if (!(error instanceof EventLogError)) throw error;
      if (Date.now() > deadline)
        throw new LocalClusterError(
          `the router has not written its log at ${logDir} within ${seconds}s (${error.message})`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const timer = setTimeout(() => abort.abort(), Math.max(0, deadline - Date.now()));
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
    `workers ${[...waiting].join(', ')} did not register within ${seconds}s`,
  );
}

/** The routers' IDs with a JetStream log: the one started to lead, then the standby. */
const JETSTREAM_ROUTERS = ['router-a', 'router-b'] as const;

/** Starts the router(s) and the workers and waits until every worker is registered. */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const stateDir = resolve(options.stateDir);
  const logsDir = resolve(stateDir, 'logs');
  // Everything under the state directory is root's alone: logs name sessions, the log holds them.
  for (const dir of [stateDir, logsDir]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  const jetstream = options.log === 'jetstream';
  const nats = jetstream ? await startLocalNats(stateDir, options.natsServer) : undefined;
  const logDir = nats ? `${nats.servers}/${LOCAL_STREAM}` : resolve(stateDir, 'log');
  const catalogue = resolve(stateDir, 'catalogue.json');
  const inForce = options.catalogue ?? defaultCatalogue(options.numpy);
  writeFileSync(catalogue, `${JSON.stringify(inForce, null, 2)}\n`, {
    mode: 0o600,
  });
  chmodSync(catalogue, 0o600);
  const routerIds: readonly string[] = jetstream ? JETSTREAM_ROUTERS : ['router'];
  const addresses = routerIds.map((_, i) => `127.0.0.1:${options.port + i}`);
  const address = addresses[0] as string;
  const env = { ...options.env };
  const workerIds =
    options.workerIds ?? Array.from({ length: options.workers }, (_, i) => `worker-${i + 1}`);
  let afterSeq: number;
  try {
    afterSeq = await lastSeqOf(logDir);
  } catch (error) {
    await nats?.stop();
    throw error;
  }
  const credentials = writeLocalCredentials(
    stateDir,
    [...workerIds, ...(options.externalWorkerIds ?? [])],
    options.extraTokens,
  );
  writeLocalAddress(stateDir, addresses);
  const routerArgs = (i: number): string[] => [
    'router',
    '--listen',
    addresses[i] as string,
    '--log',
    logDir,
    '--insecure',
    '--catalogue',
    catalogue,
    '--tokens-file',
    credentials.tokensFile,
    '--router-token-file',
    credentials.routerTokenFile,
    ...(jetstream ? ['--router-id', routerIds[i] as string] : []),
  ];
  const routers: Member[] = [];
  for (const [i, id] of routerIds.entries()) {
    routers.push(start(id, routerArgs(i), resolve(logsDir, `${id}.log`), env));
    // The first router creates the stream and leads; the standby starts once it does.
    if (jetstream && i === 0) {
      await waitForLog(logDir, routers[0] as Member).catch(async (error: unknown) => {
        routers[0]?.process.kill('SIGTERM');
        await routers[0]?.exited;
        await nats?.stop();
        throw error;
      });
    }
  }
  const firstWorkerPort = options.port + routerIds.length;
  const workers = workerIds.map((id, i) =>
    start(
      id,
      [
        'worker',
        '--router',
        addresses.join(','),
        '--listen',
        `127.0.0.1:${options.workerPorts?.[i] ?? firstWorkerPort + i}`,
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
  const members = [...routers, ...workers];
  // Detached children outlive this process unless told: on any exit that did not stop them.
  const orphaned = () => {
    for (const member of members) if (running(member)) member.process.kill('SIGTERM');
    for (const node of nats?.nodes ?? []) if (node.process.exitCode === null) node.process.kill();
  };
  process.on('exit', orphaned);
  let stopping = false;
  const unlessStopping = (why: string) =>
    stopping ? new Promise<string>(() => undefined) : Promise.resolve(why);
  if (routers.length > 1) {
    for (const router of routers) {
      void router.exited.then((code) => {
        const left = routers.filter(running);
        if (stopping || left.length === 0) return;
        const how =
          code === null ? `signal ${router.process.signalCode ?? 'unknown'}` : `code ${code}`;
        options.onRouterLost?.(
          `${router.name} exited (${how}; see ${router.logFile}); ${left.map((r) => r.name).join(', ')} carries on (a standby takes the lead within LEADER_LEASE)`,
        );
      });
    }
  }
  const failed = Promise.race([
    // Any worker that exits, and the last router (with a standby, one router's death is survived).
    ...workers.map((member) =>
      member.exited.then((code) => unlessStopping(howItEnded(member, code))),
    ),
    Promise.all(routers.map((r) => r.exited)).then((codes) =>
      unlessStopping(
        routers.length === 1
          ? howItEnded(routers[0] as Member, codes[0] ?? null, 'the router')
          : `every router exited; see ${routers.map((r) => r.logFile).join(', ')}`,
      ),
    ),
    // A three-node NATS cluster carries on with one node down, not with two.
    ...(nats ? [natsMajorityLost(nats).then((why) => unlessStopping(why))] : []),
  ]);
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      for (const worker of workers) if (running(worker)) worker.process.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
      // Standbys first: the leader stopping last hands the lease to no one.
      for (const router of [...routers].reverse()) {
        if (running(router)) router.process.kill('SIGTERM');
        await router.exited;
      }
      await nats?.stop();
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
    await waitForWorkers(logDir, workerIds, afterSeq, options.readyTimeout, ended, addresses);
  } catch (error) {
    await stop();
    throw error;
  }
  const workerProcesses = new Map(workers.map((w) => [w.name, w.process]));
  const routerProcesses = new Map(routers.map((r) => [r.name, r.process]));
  return {
    address,
    addresses,
    routerProcesses,
    nats,
    workerIds,
    workerProcesses,
    logDir,
    credentials,
    stop,
    failed,
  };
}

/**
 * Resolves once the first router has written to the stream (or rejects when it exited). The
 * router waits up to its `--log-wait` (2 min) for a NATS cluster still electing and then exits
 * saying why; this waits a minute longer than that.
 */
async function waitForLog(location: string, router: Member): Promise<void> {
  const waitMs = DEFAULT_CLUSTER_WAIT_MS + 60_000;
  const deadline = Date.now() + waitMs;
  while ((await lastSeqOf(location)) === 0) {
    if (!running(router)) {
      throw new LocalClusterError(`${router.name} exited; see ${router.logFile}`);
    }
    if (Date.now() > deadline) {
      throw new LocalClusterError(
        `${router.name} wrote nothing to ${location} within ${waitMs / 1000} s; see ${router.logFile}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Resolves when two of the three NATS nodes have exited. */
function natsMajorityLost(nats: NatsCluster): Promise<string> {
  let exited = 0;
  return new Promise((done) => {
    for (const node of nats.nodes) {
      void node.exited.then(() => {
        exited += 1;
        if (exited === 2)
          done(`two of the three NATS nodes exited; see ${node.storeDir}/../nats.log`);
      });
    }
  });
}
