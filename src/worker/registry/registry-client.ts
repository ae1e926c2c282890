/**
 * The worker's side of readie.v1.RegistryService: registration (with retries), the utilization
 * heartbeat, and container state and residency reports sent in order.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { status, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  containerStateToJSON,
  RegistryServiceClient,
  workerStatusToJSON,
  type ReportContainerStateRequest,
  type ReportStatusRequest,
  type ReportUtilizationRequest,
} from '../../proto/gen/readie/v1/registry.js';
import type { ReportResidencyRequest } from '../../proto/gen/readie/v1/residency.js';
import type { WorkerCredentials } from '../credentials.js';
import { routerDiagnosis } from './router-diagnosis.js';

/** The router could not be reached (or refused) after every attempt. */
export class RegistrationError extends Error {
  override readonly name = 'RegistrationError';
}

/** How to reach the router. */
export interface RegistryClientOptions {
  /** host:port of the router's RegistryService. */
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
}

const UNREACHABLE = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);

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
  /** Called when the router says it does not know this worker. */
  onUnregistered: () => void = () => undefined;

  constructor(private readonly options: RegistryClientOptions) {
    this.client = this.newClient();
  }

  private newClient(): RegistryServiceClient {
    return new RegistryServiceClient(
      this.options.router,
      this.options.credentials,
      CHANNEL_OPTIONS,
    );
  }

  private deadline(): Date {
    return new Date(Date.now() + this.options.callTimeoutMs);
  }

  /** One status report. */
  reportStatus(request: ReportStatusRequest): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.reportStatus(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error: ServiceError | null) => (error ? reject(error) : resolve()),
      );
    });
  }

  /**
   * Reports a status, retrying up to `registerRetries` more times while the router is
   * unreachable; throws RegistrationError once it gives up (or at once on any other refusal).
   */
  async register(request: ReportStatusRequest): Promise<void> {
    const { registerRetries, registerRetryDelayMs, log } = this.options;
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.reportStatus(request);
        log.info(
          {
            status: workerStatusToJSON(request.status),
            checkpoints: request.checkpoints,
            restoreBackend: request.restoreBackend,
            attempt: attempt + 1,
          },
          'reported status to the router',
        );
        return;
      } catch (error) {
        const { code } = error as ServiceError;
        const details = (error as ServiceError).details.replace(/\s+/g, ' ').trim();
        const reachable = !UNREACHABLE.has(code);
        // Which side speaks what, and the setting to change (src/shared/transport-problem.ts).
        const diagnosis = reachable
          ? null
          : await routerDiagnosis(this.options.router, this.options.dialsTls ?? false, details);
        const why = diagnosis === null ? details : `${details}; ${diagnosis}`;
        if (reachable || attempt >= registerRetries) {
          throw new RegistrationError(
            reachable
              ? `the router at ${this.options.router} refused the status report: ${details}`
              : `the router at ${this.options.router} is unreachable after ${attempt + 1} attempts: ${why}`,
          );
        }
        const delay = registerRetryDelayMs * 2 ** attempt;
        log.warn(
          { attempt: attempt + 1, retryInMs: delay, error: why },
          'router unreachable; retrying',
        );
        await sleep(delay);
        // A fresh channel, so the retry really dials instead of failing fast on the old
        // channel's reconnect backoff.
        this.client.close();
        this.client = this.newClient();
      }
    }
  }

  /** One utilization report; resolves with whether the router still knows this worker. */
  reportUtilization(request: ReportUtilizationRequest): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.client.reportUtilization(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error, response) => (error ? reject(error) : resolve(response?.registered ?? false)),
      );
    });
  }

  /**
   * Queues a container state report; reports go out one at a time, in order, each after the
   * current turn of the event loop so the call that caused it is not kept waiting.
   */
  reportContainerState(request: ReportContainerStateRequest): void {
    this.containerReports = this.containerReports.then(
      () =>
        new Promise<void>((resolve) =>
          setImmediate(() => void this.sendContainerState(request).then(resolve)),
        ),
    );
  }

  /** Queues a residency report, in order with the container reports. */
  reportResidency(request: ReportResidencyRequest): void {
    this.containerReports = this.containerReports.then(
      () =>
        new Promise<void>((resolve) =>
          setImmediate(() => void this.sendResidency(request).then(resolve)),
        ),
    );
  }

  private sendResidency(request: ReportResidencyRequest): Promise<void> {
    return new Promise((resolve) => {
      this.client.reportResidency(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error, response) => {
          if (error) {
            this.options.log.warn(
              { versions: request.versions.map((v) => v.checkpointId), error: error.details },
              'residency report failed',
            );
          } else if (response && !response.registered) {
            this.onUnregistered();
          }
          resolve();
        },
      );
    });
  }

  /** Resolves once every queued container report has been sent (or failed). */
  flush(): Promise<void> {
    return this.containerReports;
  }

  private sendContainerState(request: ReportContainerStateRequest): Promise<void> {
    return new Promise((resolve) => {
      this.client.reportContainerState(
        request,
        this.options.identity.reportMetadata(),
        { deadline: this.deadline() },
        (error, response) => {
          const state = containerStateToJSON(request.state);
          if (error) {
            this.options.log.warn(
              { containerId: request.containerId, state, error: error.details },
              'container state report failed',
            );
          } else if (response && !response.registered) {
            this.onUnregistered();
          }
          resolve();
        },
      );
    });
  }

  /** Closes the channel. */
  close(): void {
    this.client.close();
  }
}
