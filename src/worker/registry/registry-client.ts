/**
 * The worker's side of readie.v1.RegistryService: registration (with retries), the utilization
 * heartbeat, and container state, residency and image reports sent in order. When to retry and which
 * router to report to are the worker core's rules (src/worker/core/registry); this shell sends
 * the reports, sleeps and logs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  connectivityState,
  status,
  type CallOptions,
  type ChannelCredentials,
  type Metadata,
  type ServiceError,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  containerStateToJSON,
  RegistryServiceClient,
  workerStatusToJSON,
  type ReportContainerStateRequest,
  type ReportStatusRequest,
  type ReportUtilizationRequest,
} from '../../proto/gen/readie/v1/registry.js';
import type {
  ReportHeldImagesRequest,
  ReportImageRequest,
} from '../../proto/gen/readie/v1/registry.js';
import type { ReportResidencyRequest } from '../../proto/gen/readie/v1/residency.js';
import type { WorkerCredentials } from '../credentials.js';
import {
  afterFailedReport,
  REGISTRATION_START,
  routerAfterRefusal,
  type FailedReport,
} from '../core/registry/index.js';
import { routerDiagnosis } from './router-diagnosis.js';
import { LEADER_TRAILER, STANDBY_TRAILER } from '../../shared/call-trailers.js';

/** The router could not be reached (or refused) after every attempt. */
export class RegistrationError extends Error {
  override readonly name = 'RegistrationError';
}

/** How to reach the router. */
export interface RegistryClientOptions {
  /**
   * host:port of the router's RegistryService, or of every router (comma-separated): reports go to
   * the one that leads; a standby's refusal names the leader, and an unreachable router is left
   * for the next one in the list.
   */
  readonly router: string;
  readonly credentials: ChannelCredentials;
  /** Whether `credentials` speak TLS, for the words of a mismatch. */
  readonly dialsTls?: boolean;
  /** This worker's credential, presented on every report. */
  readonly identity: Pick<WorkerCredentials, 'reportMetadata'>;
  readonly log: Logger;
  /** Retries after the first attempt when the router is unreachable (the issue says three). */
  readonly registerRetries: number;
  /** Delay before the first retry; doubles for each later one. */
  readonly registerRetryDelayMs: number;
  /** Deadline of each report. */
  readonly callTimeoutMs: number;
  /**
   * How long registration waits while the routers answer as standbys that know no leader (a
   * shared log whose routers are still electing one), in ms. Default 2 min.
   */
  readonly leaderWaitMs?: number;
  /**
   * The worker's clock, epoch ms (default `Date.now`): the leader wait and each report's deadline
   * count from it.
   */
  readonly clock?: () => number;
  /** Registration gives up once this fires, instead of waiting to retry. */
  readonly abandon?: AbortSignal;
}

/** How long registration waits for a router to lead, by default. */
export const DEFAULT_LEADER_WAIT_MS = 120_000;

/**
 * A standby's refusal: no router takes reports here yet. Whether it names a leader or not, the
 * routers are running and electing or handing over (the leader it names, followed by `moveOn`,
 * may stand by too: a restarted pair of routers reads the lease an earlier run left until it runs
 * out), so registration waits for a leader rather than spending an unreachable router's retries.
 */
function leaderless(error: ServiceError): boolean {
  return error.code === status.UNAVAILABLE && error.metadata?.get(STANDBY_TRAILER)[0] === '1';
}

const UNREACHABLE = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);

/** What kind of failure a refused report is, for the retries. */
function failureKind(error: ServiceError): FailedReport['kind'] {
  if (leaderless(error)) return 'leaderless';
  return UNREACHABLE.has(error.code) ? 'unreachable' : 'refused';
}

/**
 * Reconnect backoff of the channel to the router: grpc-js waits up to two minutes by default,
 * longer than the router's WORKER_TTL, so a restarted router would evict a worker that could
 * not reach it yet.
 */
const CHANNEL_OPTIONS = {
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5_000,
  // Its own subchannels: a retry's fresh channel must not inherit a shared one's backoff.
  'grpc.use_local_subchannel_pool': 1,
  // Reports are retried (registration) or superseded (the next report) by the worker itself;
  // grpc-js's transparent retry layer would only add a third of each report's CPU cost.
  'grpc.enable_retries': 0,
};

/** Reports to the router. */
export class RegistryClient {
  private client: RegistryServiceClient;
  private containerReports: Promise<void> = Promise.resolve();
  private readonly routers: readonly string[];
  private current = 0;
  private readonly clock: () => number;
  /** Called when the router says it does not know this worker. */
  onUnregistered: () => void = () => undefined;

  constructor(private readonly options: RegistryClientOptions) {
    this.routers = options.router.split(',').map((address) => address.trim());
    this.clock = options.clock ?? Date.now;
    this.client = this.newClient();
  }

  /** The router reports go to now. */
  get router(): string {
    return this.routers[this.current] ?? this.options.router;
  }

  private newClient(): RegistryServiceClient {
    return new RegistryServiceClient(this.router, this.options.credentials, CHANNEL_OPTIONS);
  }

  /**
   * The client for the next report. A channel waiting out the backoff of a failed connection
   * (TRANSIENT_FAILURE: it fails every report at once until then, up to 5 s) is replaced by one
   * that connects now, so a router back at its address (restarted) gets the next report, not
   * one several report intervals later, and its view of the containers converges with the first
   * full report; no report is in flight on a channel that is not connected.
   */
  private reporter(): RegistryServiceClient {
    const channel = this.client.getChannel();
    if (channel.getConnectivityState(false) === connectivityState.TRANSIENT_FAILURE) {
      this.client.close();
      this.client = this.newClient();
    }
    return this.client;
  }

  /**
   * After a refusal: a standby names the leader (followed only when it is one of the configured
   * routers, so no router can send the worker elsewhere); an unreachable router is left for the
   * next one. Returns whether reports now go elsewhere.
   */
  private moveOn(error: ServiceError): boolean {
    const hint = error.metadata?.get(LEADER_TRAILER)[0];
    const next = routerAfterRefusal(
      this.routers,
      this.current,
      UNREACHABLE.has(error.code),
      typeof hint === 'string' ? hint : undefined,
    );
    if (next === null) return false;
    this.options.log.info(
      { from: this.router, to: this.routers[next.index], leaderNamed: next.leaderNamed },
      'reporting to another router',
    );
    this.current = next.index;
    this.client.close();
    this.client = this.newClient();
    return true;
  }

  private deadline(): Date {
    return new Date(this.clock() + this.options.callTimeoutMs);
  }

  /** One status report. */
  reportStatus(request: ReportStatusRequest): Promise<void> {
    return new Promise((resolve, reject) => {
      this.reporter().reportStatus(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error: ServiceError | null) => {
          if (error) this.moveOn(error);
          return error ? reject(error) : resolve();
        },
      );
    });
  }

  /**
   * Reports a status, retrying up to `registerRetries` more times while the router is
   * unreachable, and for up to `leaderWaitMs` while the routers answer that none leads yet;
   * throws RegistrationError once it gives up (or at once on any other refusal).
   */
  async register(request: ReportStatusRequest): Promise<void> {
    const { registerRetryDelayMs, log } = this.options;
    const policy = {
      routers: this.options.router,
      routerCount: this.routers.length,
      retriesPerRouter: this.options.registerRetries,
      retryDelayMs: registerRetryDelayMs,
      leaderWaitMs: this.options.leaderWaitMs ?? DEFAULT_LEADER_WAIT_MS,
    };
    let registration = REGISTRATION_START;
    for (;;) {
      const tried = this.router;
      try {
        await this.reportStatus(request);
        log.info(
          {
            status: workerStatusToJSON(request.status),
            checkpoints: request.checkpoints,
            restoreBackend: request.restoreBackend,
            attempt: registration.failedAttempts + 1,
          },
          'reported status to the router',
        );
        return;
      } catch (error) {
        const kind = failureKind(error as ServiceError);
        const details = (error as ServiceError).details.replace(/\s+/g, ' ').trim();
        // Which side speaks what, and the setting to change (src/shared/transport-problem.ts).
        const diagnosis =
          kind === 'unreachable'
            ? await routerDiagnosis(tried, this.options.dialsTls ?? false, details)
            : null;
        const step = afterFailedReport(
          registration,
          { kind, router: tried, details, diagnosis },
          policy,
          this.clock(),
        );
        if (step.next === 'give-up') throw new RegistrationError(step.problem);
        registration = step.registration;
        if (step.warning?.kind === 'leaderless') {
          log.warn(
            {
              waitedMs: step.warning.waitedMs,
              leaderWaitMs: policy.leaderWaitMs,
              retryInMs: step.delayMs,
            },
            'no router leads yet (each answered as a standby); waiting for one',
          );
        } else if (step.warning?.kind === 'unreachable') {
          log.warn(
            { attempt: step.warning.attempt, retryInMs: step.delayMs, error: step.warning.error },
            'router unreachable; retrying',
          );
        }
        const abandon = this.options.abandon;
        try {
          await sleep(step.delayMs, undefined, abandon ? { signal: abandon } : {});
        } catch (error) {
          if (abandon?.aborted) throw new RegistrationError('told to stop while registering');
          throw error;
        }
        // A fresh channel, so the retry really dials instead of failing fast on the old
        // channel's reconnect backoff (`moveOn` made one already when it moved on).
        if (step.freshChannel && tried === this.router) {
          this.client.close();
          this.client = this.newClient();
        }
      }
    }
  }

  /** One utilization report; resolves with whether the router still knows this worker. */
  reportUtilization(request: ReportUtilizationRequest): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.reporter().reportUtilization(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error, response) => {
          if (error) this.moveOn(error);
          return error ? reject(error) : resolve(response?.registered ?? false);
        },
      );
    });
  }

  /**
   * Queues a container state report; reports go out one at a time, in order, each after the
   * current turn of the event loop so the call that caused it is not kept waiting.
   */
  reportContainerState(request: ReportContainerStateRequest): void {
    this.enqueue(
      (answered) =>
        this.reporter().reportContainerState(request, ...this.reportOptions(), answered),
      (error) => {
        this.moveOn(error);
        this.options.log.warn(
          {
            containerId: request.containerId,
            state: containerStateToJSON(request.state),
            error: error.details,
          },
          'container state report failed',
        );
      },
    );
  }

  /** Queues a residency report, in order with the container reports. */
  reportResidency(request: ReportResidencyRequest): void {
    this.enqueue(
      (answered) => this.reporter().reportResidency(request, ...this.reportOptions(), answered),
      (error) =>
        this.options.log.warn(
          { versions: request.versions.map((v) => v.checkpointId), error: error.details },
          'residency report failed',
        ),
    );
  }

  /** Queues an image report, in order with the container reports. */
  reportImage(request: ReportImageRequest): void {
    this.enqueue(
      (answered) => this.reporter().reportImage(request, ...this.reportOptions(), answered),
      (error) =>
        this.options.log.warn(
          { imageId: request.imageId, error: error.details },
          'image report failed',
        ),
    );
  }

  /** Queues the report of every image held, in order with the image reports. */
  reportHeldImages(request: ReportHeldImagesRequest): void {
    this.enqueue(
      (answered) => this.reporter().reportHeldImages(request, ...this.reportOptions(), answered),
      (error) =>
        this.options.log.warn(
          { images: request.images.length, error: error.details },
          'report of the images held failed',
        ),
    );
  }

  /** A queued report's metadata and call options. */
  private reportOptions(): [Metadata, CallOptions] {
    return [this.options.identity.reportMetadata(), { deadline: this.deadline() }];
  }

  /**
   * Sends a report after those queued before it, after the current turn: a failure goes to
   * `failed`, an answer that the router no longer knows this worker to `onUnregistered`.
   */
  private enqueue(
    send: (
      answered: (error: ServiceError | null, response?: { registered: boolean }) => void,
    ) => void,
    failed: (error: ServiceError) => void,
  ): void {
    this.containerReports = this.containerReports.then(
      () =>
        new Promise<void>((resolve) =>
          setImmediate(() =>
            send((error, response) => {
              if (error) failed(error);
              else if (response && !response.registered) this.onUnregistered();
              resolve();
            }),
          ),
        ),
    );
  }

  /** Resolves once every queued container report has been sent (or failed). */
  flush(): Promise<void> {
    return this.containerReports;
  }

  /** Closes the channel. */
  close(): void {
    this.client.close();
  }
}
