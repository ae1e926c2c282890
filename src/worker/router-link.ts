/**
 * The worker's ongoing conversation with the router: its status (again whenever the router forgot
 * it or the checkpoints changed), the utilization heartbeat, container state changes, and the
 * REMOVED report when it leaves.
 */
import { status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  ReportContainerStateRequest,
  ReportStatusRequest,
  ReportUtilizationRequest,
} from '../proto/gen/readie/v1/registry.js';
import type {
  ReportHeldImagesRequest,
  ReportImageRequest,
} from '../proto/gen/readie/v1/registry.js';
import type { ReportResidencyRequest } from '../proto/gen/readie/v1/residency.js';
import type { RegistryClient } from './registry/index.js';

/** What the link asks the worker for. */
export interface RouterLinkSources {
  /** The status report as of now. */
  readonly status: () => ReportStatusRequest;
  /** The utilization report as of now. */
  readonly utilization: () => Promise<ReportUtilizationRequest>;
  /**
   * The router refused this process the worker ID (`ALREADY_EXISTS`: another live process holds
   * it), with its message.
   */
  readonly displaced: (message: string) => void;
  /**
   * The full residency report as of now (every version with a state, and the budget), sent after
   * each status report: a registration makes the router forget what it knew. Null: none to send.
   */
  readonly residency: () => ReportResidencyRequest | null;
  /**
   * The report of every image held as of now, sent after each status report (queued with the
   * image reports, so it is read in order with builds and removals): the router makes its
   * holdings for this worker agree with it. Null: none to send.
   */
  readonly heldImages: () => ReportHeldImagesRequest | null;
}

/** Reports to the router, in order. */
export class RouterLink {
  private statusReports: Promise<void> = Promise.resolve();
  private utilizationTimer: NodeJS.Timeout | null = null;
  private leaving = false;

  constructor(
    private readonly registry: RegistryClient,
    private readonly sources: RouterLinkSources,
    private readonly log: Logger,
  ) {
    registry.onUnregistered = () => this.reportStatusAgain('the router does not know this worker');
  }

  /** Registers (with the registry client's retries); throws once it gives up. */
  async register(): Promise<void> {
    await this.registry.register(this.sources.status());
    this.reportAllResidency();
    this.reportAllImages();
  }

  /** Queues a report of a tenant's image (built, failed, removed). */
  image(report: ReportImageRequest): void {
    if (!this.leaving) this.registry.reportImage(report);
  }

  /** Queues a residency report of changed versions. */
  residency(report: ReportResidencyRequest): void {
    if (!this.leaving) this.registry.reportResidency(report);
  }

  private reportAllResidency(): void {
    const report = this.sources.residency();
    if (report) this.registry.reportResidency(report);
  }

  private reportAllImages(): void {
    const report = this.sources.heldImages();
    if (report) this.registry.reportHeldImages(report);
  }

  /** Reports the status again, after any status report still under way. */
  reportStatusAgain(why: string): void {
    this.statusReports = this.statusReports.then(async () => {
      if (this.leaving) return;
      try {
        const status = this.sources.status();
        await this.registry.reportStatus(status);
        this.reportAllResidency();
        this.reportAllImages();
        this.log.info({ why, checkpoints: status.checkpoints }, 'reported status again');
      } catch (error) {
        if ((error as ServiceError).code === grpcStatus.ALREADY_EXISTS) {
          this.leaving = true;
          if (this.utilizationTimer) clearInterval(this.utilizationTimer);
          this.sources.displaced((error as ServiceError).details);
          return;
        }
        this.log.warn({ why, error: (error as Error).message }, 'status report failed');
      }
    });
  }

  /** Queues a container state change. */
  containerState(report: ReportContainerStateRequest): void {
    this.registry.reportContainerState(report);
  }

  /** Reports utilization every `intervalMs` (one report at a time). */
  startUtilization(intervalMs: number): void {
    let running = false;
    this.utilizationTimer = setInterval(() => {
      if (running) return;
      running = true;
      void this.reportUtilization().finally(() => (running = false));
    }, intervalMs);
    this.utilizationTimer.unref();
  }

  private async reportUtilization(): Promise<void> {
    try {
      const registered = await this.registry.reportUtilization(await this.sources.utilization());
      if (!registered) this.reportStatusAgain('the router does not know this worker');
    } catch (error) {
      this.log.warn({ error: (error as Error).message }, 'utilization report failed');
    }
  }

  /** Stops the heartbeat and reports `removed` (a REMOVED status), after earlier status reports. */
  async leave(removed: ReportStatusRequest): Promise<void> {
    this.leaving = true;
    if (this.utilizationTimer) clearInterval(this.utilizationTimer);
    await this.statusReports;
    try {
      await this.registry.reportStatus(removed);
      this.log.info('reported REMOVED to the router');
    } catch (error) {
      this.log.warn({ error: (error as Error).message }, 'could not report REMOVED');
    }
  }

  /** Waits for queued container reports, then closes the channel. */
  async close(): Promise<void> {
    this.leaving = true;
    if (this.utilizationTimer) clearInterval(this.utilizationTimer);
    await this.registry.flush();
    this.registry.close();
  }
}
