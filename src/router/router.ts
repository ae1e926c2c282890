/**
 * The router process: opens the event log (newest snapshot plus tail), appends `RouterStarted`,
 * the catalogue if it changed and the recovery of calls that were in flight when it last stopped,
 * then serves `ProxyService`, `RegistryService` and `grpc.health.v1`, probes workers and runs the
 * reaper. `startRouter` is what `readie router` runs, and what the tests start in-process.
 */
import {
  type Metadata,
  Server,
  type ServerInterceptor,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { decodingService } from '../shared/wire-decoding.js';
import { HealthImplementation } from 'grpc-health-check';
import { randomBytes } from 'node:crypto';
import {
  DEFAULT_CLUSTER_WAIT_MS,
  EventLogError,
  JetStreamEventLog,
  JetStreamUnavailableError,
  LogLockedError,
  openEventLog,
  type ClusterWaitReport,
  type EventLogBackend,
  type OpenLogOptions,
} from '../events/index.js';
import { streamNames } from '../events/jetstream/stream-format.js';
import { RouterConfigError } from '../core/errors.js';
import { ProxyServiceClient } from '../proto/gen/readie/v1/proxy.js';
import { AdminServiceClient, AdminServiceService } from '../proto/gen/readie/v1/admin.js';
import { PlacementCaches } from '../core/placement/index.js';
import {
  clusterProjectionTelling,
  hasAddress,
  isLive,
  type ClusterState,
} from '../projections/index.js';
import { RegistryServiceClient, RegistryServiceService } from '../proto/gen/readie/v1/registry.js';
import { TenantServiceClient, TenantServiceService } from '../proto/gen/readie/v1/tenant.js';
import { DEFAULT_CONFIG, retentionProblem, type Config } from '../shared/config.js';
import { adminService, tenantService, WorkerFailures } from './admin/index.js';
import { ActiveCalls, type CallPathOptions, type WorkerLinks } from './calls/index.js';
import { CallLogsRelay, HistoryFeed } from './history/index.js';
import { Journal } from './journal/index.js';
import { LeaderLease, standbyInterceptor, type LeaseHolder } from './leadership/index.js';
import { Prober, ReaperTimer } from './liveness/index.js';
import {
  createLogger,
  RouterMetrics,
  serveMetrics,
  type Logger,
  type MetricsServer,
} from './observability/index.js';
import { registryService } from './registry/index.js';
import { ResidencyKeeper } from './routing/index.js';
import { Admitter } from './admission/index.js';
import { defaultArchiveDir, LogRetention } from './retention/index.js';
import type { PassReport } from '../events/index.js';
import {
  credentialInterceptor,
  formatHostPort,
  parseHostPort,
  RouterCredentials,
  serverCredentialsOf,
  workerChannelCredentials,
  type CredentialsSummary,
  type HostPort,
  type Refusal,
  type RouterAuth,
  type ServingSecurity,
} from './security/index.js';
import { SessionTurns } from './sessions/index.js';
import { decide } from '../core/decisions.js';
import type { RevisedCatalogue } from './startup/index.js';
import { WorkerConnections } from './workers/index.js';
import {
  FrontServer,
  grpcJsStreams,
  H2WorkerLinks,
  PROXY_PATH,
  proxyStreams,
  type ConnectionBounds,
  type GrpcJsStreams,
  type StreamHandler,
} from './wire/index.js';

/** How to run a router. */
export interface RouterOptions {
  /** `HOST:PORT` to serve gRPC on; port 0 picks a free one. */
  readonly listen: string;
  /**
   * The event log: an LMDB directory (created if missing), or a JetStream stream,
   * `nats://HOST:PORT[,HOST:PORT...]/STREAM` (created if missing), which any number of routers
   * share: one leads, the others stand by (docs/router.md, "Standby routers").
   */
  readonly logDir: string;
  /**
   * Where segments of the log past its retention go (`--archive`): default `archive` inside an
   * LMDB log's directory; a JetStream log archives nothing without one.
   */
  readonly archiveDir?: string;
  /** How often the retention runs a pass while the router leads (default 60 s). */
  readonly archivePassIntervalMs?: number;
  /** A JetStream log: this router's ID in the lease (default: a random one). */
  readonly routerId?: string;
  /** A JetStream log: the address workers and clients are told to reach this router at (default: the bound one). */
  readonly advertise?: string;
  /** A JetStream log: replicas of the stream and buckets it creates (default 3). */
  readonly replicas?: number;
  /**
   * A JetStream log: how long the start waits, in ms, for a NATS cluster that is still starting
   * or electing (opening the log, then the lease) before it fails (default 2 min).
   */
  readonly logWaitMs?: number;
  /** TLS material, or plaintext when explicitly asked for. */
  readonly security: ServingSecurity;
  /** The settings (docs/router.md) in canonical units. Default: the defaults. */
  readonly config?: Config;
  /**
   * How callers are authenticated (docs/security.md): a tokens file naming tenants, workers and
   * operators plus the router's own token for workers, or a development mode. Default: none.
   */
  readonly auth?: RouterAuth;
  /** PEM CA certificates to dial workers over TLS; plaintext without. */
  readonly workerCa?: Buffer | undefined;
  /** A catalogue to put in force (appended unless that revision already is). */
  readonly catalogue?: RevisedCatalogue | undefined;
  /** `HOST:PORT` for Prometheus metrics over HTTP; none when absent. */
  readonly metrics?: string | undefined;
  /** The logger (default: JSON at info level on standard output). */
  readonly logger?: Logger;
  /**
   * The router's clock, in epoch ms (default `Date.now`): it stamps events, drives the reaper and
   * sets the deadlines of worker streams and probes. Nothing in the router reads another.
   */
  readonly clock?: () => number;
  /** Snapshot the state every this many events (default 10,000). */
  readonly snapshotEvery?: number;
  /** The version recorded in `RouterStarted` (default: package.json's). */
  readonly version: string;
  /** Called when the router stops serving on its own (the log failed). */
  readonly onFatal?: (error: Error) => void;
  /**
   * What relays calls: by default the platform's HTTP/2, relaying messages as the frames they
   * arrived as; a `GrpcJsCallTransport` instead serves them on the router's grpc-js server (the
   * first relay, kept in `bench/grpc-js-relay/` as a benchmark baseline).
   */
  readonly relay?: GrpcJsCallTransport;
}

/**
 * A call transport on the router's grpc-js server in place of the platform's HTTP/2: the service
 * that takes `RequestExecution` streams, and the links that reach workers. Not a product setting.
 */
export interface GrpcJsCallTransport {
  /** The call service, for the router's grpc-js server. */
  service(
    callPath: CallPathOptions,
    credentials: RouterCredentials,
  ): readonly [ServiceDefinition, UntypedServiceImplementation];
  /** How calls reach workers, over the router's grpc-js channels. */
  workerLinks(connections: WorkerConnections, workerMetadata: Metadata): WorkerLinks;
}

/** A running router. */
export interface Router {
  /** `host:port` it serves on (the real port when 0 was asked for). */
  readonly address: string;
  /** `host:port` of the metrics endpoint, if any. */
  readonly metricsAddress: string | undefined;
  /** The live folded state. */
  readonly state: ClusterState;
  /** `leader` while it serves; `standby` while it follows a JetStream log; `stopped` after. */
  readonly role: 'leader' | 'standby' | 'stopped';
  /** Resolves once it serves (at once for an LMDB log; on taking the lease over for JetStream). */
  readonly leading: Promise<void>;
  /** Calls waiting for their session's turn. */
  readonly waitingCalls: number;
  /** Why each worker's last health probe failed (in words naming the fix), by worker ID. */
  readonly probeProblems: ReadonlyMap<string, string>;
  /** Runs one probe round now; resolves once recorded (the timer does it every `PROBE_INTERVAL`). */
  probeNow(): Promise<void>;
  /**
   * Runs one retention pass now (the timer does it every minute while the router leads):
   * resolves with what it archived and expired, undefined when the router archives nothing.
   */
  archiveNow(): Promise<PassReport | undefined>;
  /**
   * Reads the tokens file and the router's token file again and puts them in force; throws (a
   * TokensFileError naming the file and line) and keeps the credentials in force when they are bad.
   */
  reloadCredentials(): CredentialsSummary;
  /**
   * Stops: refuses new calls, lets running calls finish for up to `graceMs` (default 5 s), ends
   * the rest with `UNAVAILABLE` (each with its `CallFinished`), then flushes and closes the log.
   */
  close(graceMs?: number): Promise<void>;
}

/** gRPC server options: a chunk is at most 1 MiB; allow room so a bigger one is refused by us. */
const SERVER_OPTIONS = {
  'grpc.max_receive_message_length': 4 * 1024 * 1024,
  'grpc.keepalive_time_ms': 60_000,
};

/** The service names the router's health service reports ('' for the server as a whole). */
const HEALTH_SERVICES = [
  '',
  ProxyServiceClient.serviceName,
  RegistryServiceClient.serviceName,
  AdminServiceClient.serviceName,
  TenantServiceClient.serviceName,
];

/** Starts a router; resolves once it serves. */
export async function startRouter(options: RouterOptions): Promise<Router> {
  const config = options.config ?? DEFAULT_CONFIG;
  const clock = options.clock ?? Date.now;
  const logger = options.logger ?? createLogger('info');
  const retentionRefusal = retentionProblem(config);
  if (retentionRefusal !== undefined) throw new RouterConfigError(retentionRefusal);
  // Bad addresses are configuration errors: refuse them before the log records a start.
  const listen = parseHostPort(options.listen);
  const metricsListen = options.metrics === undefined ? undefined : parseHostPort(options.metrics);
  const credentials = RouterCredentials.load(options.auth ?? { mode: 'none' });
  // Placement's caches belong to the state they serve: the log folds with them as its change sink.
  const placement = new PlacementCaches();
  // One wait covers the whole start on a JetStream log: the log, then the lease's bucket.
  const logWaitMs = options.logWaitMs ?? DEFAULT_CLUSTER_WAIT_MS;
  const waitStartedAt = clock();
  const onWait = (report: ClusterWaitReport) =>
    logger.warn(
      {
        log: options.logDir,
        problem: report.problem,
        waitedMs: report.waitedMs,
        waitMs: logWaitMs,
      },
      `router waiting for the NATS cluster to answer (still starting or electing leaders): could not ${report.what} yet; retrying`,
    );
  // The call history listens to the same fold (docs/calls.md); the start rebuilds it from the tail.
  const historyFeed = new HistoryFeed(config);
  const log = await openLog(options.logDir, {
    projection: historyFeed.wrap(clusterProjectionTelling(placement)),
    clock,
    snapshotEvery: options.snapshotEvery ?? 10_000,
    snapshotIntervalMs: config.SNAPSHOT_INTERVAL,
    replicas: options.replicas,
    waitMs: logWaitMs,
    waitStartedAt,
    onWait,
    waitSetting: '--log-wait',
  });
  try {
    await historyFeed.backfill(log, clock());
  } catch (error) {
    await log.close();
    throw error;
  }
  // A JetStream log is shared: this router leads only while it holds the lease.
  const shared = log instanceof JetStreamEventLog ? log : undefined;
  const routerId = options.routerId ?? `router-${randomBytes(4).toString('hex')}`;
  let role: 'leader' | 'standby' | 'stopped' = 'standby';
  let lease: LeaderLease | undefined;
  let markLeading: () => void = () => undefined;
  const leading = new Promise<void>((resolve) => (markLeading = resolve));
  const active = new ActiveCalls();
  const turns = new SessionTurns(clock);
  const metrics = new RouterMetrics({
    state: () => log.state,
    inFlight: () => active.inFlight,
    sessionsWaiting: () => turns.waiting,
    log: () => logRetention.view(),
  });
  const health = new HealthImplementation(
    Object.fromEntries(HEALTH_SERVICES.map((name) => [name, 'NOT_SERVING' as const])),
  );
  const journal: Journal = new Journal(log, metrics, logger, (error) => {
    role = 'stopped';
    for (const name of HEALTH_SERVICES) health.setStatus(name, 'NOT_SERVING');
    active.shutDownAll(
      shared
        ? 'the router lost the leadership of its log: retry at the router that leads'
        : 'the router event log failed: the router must restart',
    );
    void lease?.stop(false);
    logRetention.stop();
    options.onFatal?.(error);
  });
  const logRetention: LogRetention = new LogRetention({
    log,
    journal,
    config,
    clock,
    logger,
    archiveDir: options.archiveDir ?? defaultArchiveDir(options.logDir),
    ...(options.archivePassIntervalMs === undefined
      ? {}
      : { passIntervalMs: options.archivePassIntervalMs }),
    onArchived: (event) => {
      if (event.type === 'LogSegmentArchived') metrics.archivedSegments.inc();
      else metrics.expiredArchives.inc();
    },
    onFailure: () => metrics.archiveFailures.inc(),
  });

  let server: Server | undefined;
  let front: FrontServer | undefined;
  let metricsServer: MetricsServer | undefined;
  const grpcJsRelay = options.relay;
  const connections = new WorkerConnections(workerChannelCredentials(options.workerCa));
  const h2Links = new H2WorkerLinks(options.workerCa, credentials.workerMetadata, clock);
  try {
    const onRefused = ({ path, code, problem }: Refusal) => {
      if (code === 'UNAUTHENTICATED') metrics.unauthenticated.inc();
      else metrics.permissionDenied.inc();
      logger.warn(
        { path, code, problem },
        code === 'UNAUTHENTICATED'
          ? 'call refused: not authenticated'
          : 'call refused: not allowed',
      );
    };
    const standby = {
      serving: () => role === 'leader',
      leader: () => (role === 'stopped' ? undefined : lease?.holder?.address),
    };
    const interceptors: ServerInterceptor[] = [
      standbyInterceptor(standby),
      credentialInterceptor(credentials, onRefused),
    ];
    server = new Server({ ...SERVER_OPTIONS, interceptors });
    const failures = new WorkerFailures();
    const callPath = {
      journal,
      placement,
      turns,
      workers: grpcJsRelay
        ? grpcJsRelay.workerLinks(connections, credentials.workerMetadata)
        : h2Links,
      active,
      config,
      clock,
      logger,
      metrics,
      failures,
    };
    const history = {
      history: historyFeed.history,
      logs: new CallLogsRelay({
        state: () => log.state,
        connections,
        workerMetadata: credentials.workerMetadata,
      }),
    };
    // Built before the services (a registration asks it whether a worker ID's holder still
    // answers), started only once the start is recorded.
    const probes = new Prober({
      dialsTls: options.workerCa !== undefined,
      journal,
      connections,
      config,
      clock,
      logger,
      metrics,
      workerMetadata: credentials.workerMetadata,
    });
    // Every request the router decodes, it answers: undecodable bytes get INVALID_ARGUMENT.
    const serve = (definition: ServiceDefinition, implementation: UntypedServiceImplementation) =>
      server?.addService(...decodingService(definition, implementation));
    if (grpcJsRelay) server.addService(...grpcJsRelay.service(callPath, credentials));
    serve(
      RegistryServiceService,
      registryService({
        journal,
        logger,
        credentials,
        answersProbe: (holder) => probes.answers(holder),
      }),
    );
    const imageAsking = {
      state: () => log.state,
      connections,
      workerMetadata: credentials.workerMetadata,
      clock,
    };
    serve(
      AdminServiceService,
      adminService({
        state: () => log.state,
        live: () => ({
          callsInFlight: active.inFlight,
          callsWaiting: turns.waiting,
          probeProblems: probes.lastProblems,
          failures,
          log: logRetention.view(),
        }),
        credentials,
        logger,
        journal,
        placement,
        clock,
        history,
        images: imageAsking,
      }),
    );
    serve(
      TenantServiceService,
      tenantService({
        state: () => log.state,
        credentials,
        sessions: {
          journal,
          turns,
          connections,
          config,
          clock,
          logger,
          workerMetadata: credentials.workerMetadata,
        },
        history,
        images: imageAsking,
      }),
    );
    health.addToServer({ addService: serve });
    if (metricsListen !== undefined) {
      metricsServer = await serveMetrics(metricsListen, metrics.registry).catch(
        (error: unknown) => {
          throw listenError('--metrics', formatHostPort(metricsListen), error);
        },
      );
    }
    const port = grpcJsRelay
      ? await bind(server, listen, serverCredentialsOf(options.security))
      : (front = await listenFront(
          listen,
          options.security,
          new Map([[PROXY_PATH, proxyStreams(callPath, credentials, onRefused, standby)]]),
          grpcJsStreams(server),
          config,
        )).port;
    const address = formatHostPort({ host: listen.host, port });
    // Nothing is in the log until the router can serve: a start that fails (a locked log, a port
    // in use, bad TLS material) leaves the log as it was. The start is recorded in the same tick
    // as the bind's answer (or the lease's), so no call is handled before it: recovery releases
    // the dead calls first, and the state is folded before the commit is awaited.
    const reaper = new ReaperTimer({
      journal,
      config,
      clock,
      logger,
      onPass: () => {
        const live = liveAddresses(log.state);
        connections.retain(live);
        h2Links.retain(live);
      },
    });
    const residency = new ResidencyKeeper({
      journal,
      connections,
      placement,
      config,
      clock,
      logger,
      workerMetadata: credentials.workerMetadata,
    });
    // Queued calls are admitted whenever capacity can have changed (the rules are the core's).
    const admitter = new Admitter({ journal, placement, active, logger });
    const lead = async (takeover: LeaseHolder | undefined): Promise<void> => {
      // Another log's archive directory is refused before anything is recorded.
      await logRetention.prepare();
      const before = log.state;
      const recoveredSeq = log.lastSeq;
      const start = decide('start', before, {
        config,
        version: options.version,
        catalogue: options.catalogue,
        ...(shared ? { router: { routerId, takeoverFrom: takeover?.routerId ?? null } } : {}),
      });
      const recovered = start.events;
      role = 'leader';
      await journal.record(start).committed;
      logger.info(
        {
          log: log.location,
          lastSeq: recoveredSeq,
          workers: before.workers.size,
          sessions: before.sessions.size,
          reservationsReleased: recovered.filter((e) => e.type === 'ReservationExpired').length,
          catalogueRevision: log.state.catalogue?.revision ?? null,
          version: options.version,
          ...(shared ? { routerId, takeoverFrom: takeover?.routerId ?? null } : {}),
        },
        shared
          ? 'router took the lead: its state is folded from the stream'
          : 'router recovered its state from the log',
      );
      probes.start();
      reaper.start();
      residency.start();
      logRetention.start();
      if (logRetention.off !== '' && config.LOG_RETENTION > 0) {
        logger.warn({ log: log.location }, `the event log is not archived: ${logRetention.off}`);
      }
      for (const name of HEALTH_SERVICES) health.setStatus(name, 'SERVING');
      markLeading();
    };
    if (!shared) {
      await lead(undefined);
    } else {
      shared.startFollowing();
      const me = { routerId, address: options.advertise ?? address };
      lease = await LeaderLease.open({
        connection: shared.connection,
        bucket: streamNames(shared.where.stream).leaseBucket,
        replicas: options.replicas ?? 3,
        leaseMs: config.LEADER_LEASE,
        me,
        clock,
        wait: {
          waitMs: logWaitMs,
          startedAt: waitStartedAt,
          clock,
          onWait,
          waitSetting: '--log-wait',
        },
        onLeading: (previous) => {
          // Said before the takeover's reads and first append: one that never ends shows here.
          logger.info(
            { takeoverFrom: previous?.routerId ?? null },
            'router won the lease: taking over',
          );
          void (async () => {
            try {
              await shared.stopFollowing();
              await lead(previous);
            } catch (error) {
              logger.error({ err: error }, 'router could not take the lead');
              journal.stop(error as Error);
            }
          })();
        },
        onContendFailed: (why) => logger.info({ why }, 'router could not take the lease yet'),
        onLost: (why) => {
          logger.warn({ why }, 'router lost the lease: it steps down');
          journal.stop(new EventLogError(`the router lost the lease of ${log.location}: ${why}`));
        },
      });
      lease.start();
      logger.info(
        { log: log.location, routerId, lastSeq: log.lastSeq, leaseMs: config.LEADER_LEASE },
        'router standing by: following the log until the lease is free',
      );
    }
    const inForce = credentials.summary();
    if (options.workerCa === undefined && inForce.routerToken) {
      logger.warn(
        "workers are dialed in plaintext: the router's token travels unencrypted to them (pass --worker-ca)",
      );
    }
    for (const warning of inForce.warnings) logger.warn(warning);
    if (inForce.mode !== 'tokens') {
      logger.warn(
        { auth: inForce.mode },
        inForce.mode === 'none'
          ? 'no credentials: anyone who reaches this port may call, register workers and administer (development only)'
          : 'single-token mode: one token authorizes every client, worker and operator (development only)',
      );
    }
    logger.info(
      {
        address,
        tls: options.security.kind === 'tls',
        auth: inForce.mode,
        credentials: inForce.credentials,
        routerToken: inForce.routerToken,
        metrics: metricsServer?.address ?? null,
        role,
      },
      'router serving',
    );

    let closing: Promise<void> | undefined;
    const running = server;
    const runningFront = front;
    const runningMetrics = metricsServer;
    return {
      address,
      metricsAddress: runningMetrics?.address,
      get state() {
        return log.state;
      },
      get role() {
        return role;
      },
      leading,
      get waitingCalls() {
        return turns.waiting;
      },
      get probeProblems() {
        return probes.lastProblems;
      },
      probeNow: () => probes.probeAll(),
      archiveNow: () => logRetention.passNow(),
      reloadCredentials() {
        const summary = credentials.reload();
        for (const warning of summary.warnings) logger.warn(warning);
        logger.info(
          { credentials: summary.credentials, routerToken: summary.routerToken },
          'credentials reloaded',
        );
        return summary;
      },
      close(graceMs = 5_000) {
        closing ??= (async () => {
          const wasLeading = role === 'leader';
          role = 'stopped';
          probes.stop();
          reaper.stop();
          residency.stop();
          admitter.stop();
          logRetention.stop();
          // A leader that stops hands the lease on at once (a standby need not wait it out).
          await lease?.stop(wasLeading && !journal.failed);
          for (const name of HEALTH_SERVICES) health.setStatus(name, 'NOT_SERVING');
          await shutdown(running, runningFront, active, graceMs);
          await runningMetrics?.close();
          connections.closeAll();
          h2Links.closeAll();
          if (!journal.failed) await journal.flushed().catch(() => undefined);
          await log.close();
          logger.info({ lastSeq: log.lastSeq }, 'router stopped');
        })();
        return closing;
      },
    };
  } catch (error) {
    server?.forceShutdown();
    front?.destroySessions();
    await front?.stopListening();
    await metricsServer?.close();
    connections.closeAll();
    h2Links.closeAll();
    await log.close();
    throw error;
  }
}

/** Binds the server; resolves with the port. */
function bind(
  server: Server,
  listen: HostPort,
  credentials: ReturnType<typeof serverCredentialsOf>,
): Promise<number> {
  const target = formatHostPort(listen);
  return new Promise((resolve, reject) => {
    server.bindAsync(target, credentials, (error, boundPort) => {
      if (error) reject(listenError('--listen', target, error));
      else resolve(boundPort);
    });
  });
}

/** The log at `dir`, opened for writing; one it cannot open is a configuration error. */
async function openLog(
  dir: string,
  options: OpenLogOptions<ClusterState>,
): Promise<EventLogBackend<ClusterState>> {
  try {
    return await openEventLog<ClusterState>(dir, options);
  } catch (error) {
    // A cluster that never answered is not a configuration error: the message says what to check.
    if (error instanceof JetStreamUnavailableError) throw error;
    if (error instanceof LogLockedError) {
      throw new RouterConfigError(
        `--log ${dir}: ${error.message}. One router per log: stop the other router, or give this one its own --log`,
      );
    }
    if (error instanceof EventLogError)
      throw new RouterConfigError(`--log ${dir}: ${error.message}`);
    throw error;
  }
}

/** Why an address could not be listened on, with what to do about it. */
function listenError(flag: string, target: string, error: unknown): RouterConfigError {
  const message = error instanceof Error ? error.message : String(error);
  if (/EADDRINUSE|address already in use/i.test(message)) {
    return new RouterConfigError(
      `cannot listen on ${target}: the address is in use (another router, or another program, ` +
        `listens there): stop it, or pass another ${flag}`,
    );
  }
  return new RouterConfigError(
    `cannot listen on ${target} (${message}): pass an address this host can listen on with ${flag}`,
  );
}

/** Listens with the router's own HTTP/2 front; a failure names `--listen`. */
async function listenFront(
  listen: HostPort,
  security: ServingSecurity,
  handlers: ReadonlyMap<string, StreamHandler>,
  grpcJs: GrpcJsStreams,
  bounds: ConnectionBounds,
): Promise<FrontServer> {
  try {
    return await FrontServer.listen(listen.host, listen.port, security, handlers, grpcJs, bounds);
  } catch (error) {
    throw listenError('--listen', formatHostPort(listen), error);
  }
}

/** Stops accepting calls, waits up to `graceMs` for running ones, then ends the rest. */
async function shutdown(
  server: Server,
  front: FrontServer | undefined,
  active: ActiveCalls,
  graceMs: number,
): Promise<void> {
  const stopped = front?.stopListening();
  const drained = Promise.all([
    new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
    front?.drained(),
  ]);
  front?.closeSessions();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const outcome = await Promise.race([drained, timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    active.shutDownAll('the router is shutting down');
    // Give the statuses a moment to leave before cutting connections.
    await new Promise((resolve) => setTimeout(resolve, 50));
    server.forceShutdown();
    front?.destroySessions();
  }
  await stopped;
}

/** Addresses of workers the router has not evicted: their channels stay open. */
function liveAddresses(state: ClusterState): Set<string> {
  const addresses = new Set<string>();
  for (const worker of state.workers.values()) {
    if (isLive(worker) && hasAddress(worker)) addresses.add(worker.address);
  }
  return addresses;
}
