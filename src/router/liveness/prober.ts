/**
 * Health probes (shell): every `PROBE_INTERVAL` a standard `grpc.health.v1` check of every worker
 * the router has not evicted, with a `PROBE_TIMEOUT` deadline. Anything but `SERVING` is a failure;
 * each failure appends `WorkerProbeFailed`, and `PROBE_FAILURE_THRESHOLD` consecutive ones evict
 * the worker; a success after failures appends `WorkerProbeSucceeded` (see the core's
 * `liveness/probe-outcome.ts`). The count lives in the log alone. A worker is never probed twice
 * at once.
 */
import type { Metadata } from '@grpc/grpc-js';
import { hasAddress, isLive } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import type { RouterMetrics } from '../observability/metrics.js';
import { workerDiagnosis, type WorkerConnections } from '../workers/index.js';
import { decide } from '../../core/decisions.js';

/** What the prober needs. */
export interface ProberOptions {
  readonly journal: Journal;
  readonly connections: WorkerConnections;
  readonly config: Config;
  /** The router's clock, in epoch ms (the probes' deadlines count from it). */
  readonly clock: () => number;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /** Metadata for each probe (the router's own credential, when it has one); sent as a clone. */
  readonly workerMetadata: Metadata;
  /** Whether the router dials workers over TLS (`--worker-ca`), for the words of a mismatch. */
  readonly dialsTls: boolean;
}

/** Probes every worker on a timer. */
export class Prober {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly pending = new Map<string, Promise<void>>();
  /** Why each worker's last probe failed (gone once a probe succeeds); `readie status` shows it. */
  private readonly problems = new Map<string, string>();

  /** Why each worker's last probe failed, by worker ID. */
  get lastProblems(): ReadonlyMap<string, string> {
    return this.problems;
  }

  constructor(private readonly options: ProberOptions) {}

  /** Starts probing every `PROBE_INTERVAL`. */
  start(): void {
    this.schedule();
  }

  /** Stops probing (probes under way finish but append nothing). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /**
   * Probes every live worker with an address once (also what the timer runs); resolves when
   * these probes (and any still under way from before) have been recorded.
   */
  probeAll(): Promise<void> {
    const { journal, connections } = this.options;
    const round: Promise<void>[] = [];
    for (const worker of journal.state.workers.values()) {
      if (!isLive(worker) || !hasAddress(worker)) continue;
      const { workerId, address } = worker;
      const pending = this.pending.get(workerId);
      if (pending) {
        round.push(pending);
        continue;
      }
      const probe = this.check(connections, workerId, address).then(
        (problem) => {
          this.pending.delete(workerId);
          if (!this.stopped) this.record(workerId, problem);
        },
        () => {
          this.pending.delete(workerId);
        },
      );
      this.pending.set(workerId, probe);
      round.push(probe);
    }
    return Promise.all(round).then(() => undefined);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.probeAll();
      this.schedule();
    }, this.options.config.PROBE_INTERVAL);
  }

  /** Whether the worker at `address` answers one health check with `SERVING` (nothing recorded). */
  async answers(address: string): Promise<boolean> {
    return (await this.check(this.options.connections, 'the holder', address)) === null;
  }

  /**
   * One health check: null when the worker answered `SERVING`, else what went wrong, in words that
   * name the fix when the connection failed (a TLS mismatch: which side speaks what).
   */
  private async check(
    connections: WorkerConnections,
    workerId: string,
    address: string,
  ): Promise<string | null> {
    const { config, workerMetadata, clock, dialsTls } = this.options;
    const outcome = await new Promise<{ failed: string; details: string } | string | null>(
      (resolve) => {
        connections
          .health(address)
          .check(
            { service: '' },
            workerMetadata.clone(),
            { deadline: clock() + config.PROBE_TIMEOUT },
            (error, response) => {
              if (error) {
                resolve({ failed: `health check failed: ${error.code}`, details: error.details });
              } else if (response?.status !== 'SERVING') {
                resolve(`health check answered ${response?.status ?? 'nothing'}`);
              } else resolve(null);
            },
          );
      },
    );
    if (outcome === null || typeof outcome === 'string') return outcome;
    const said = outcome.details.replace(/\s+/g, ' ').trim();
    const diagnosis = await workerDiagnosis(workerId, address, dialsTls, said);
    return `${outcome.failed} ${said}${diagnosis === null ? '' : `; ${diagnosis}`}`;
  }

  private record(workerId: string, problem: string | null): void {
    const { journal, logger, metrics } = this.options;
    if (problem === null) {
      this.problems.delete(workerId);
      const decision = decide('probeSuccess', journal.state, { workerId });
      if (decision.events.length === 0) return;
      try {
        journal.record(decision);
        logger.info({ workerId }, 'worker answers its health probes again');
      } catch (error) {
        logger.error({ err: error, workerId }, 'could not record a successful probe');
      }
      return;
    }
    this.problems.set(workerId, problem);
    metrics.probeFailures.inc();
    const decision = decide('probeFailure', journal.state, { workerId, error: problem });
    const { events, consecutive } = decision;
    if (events.length === 0) return;
    try {
      journal.record(decision);
    } catch (error) {
      logger.error({ err: error, workerId }, 'could not record a failed probe');
      return;
    }
    const evicted = events.some((event) => event.type === 'WorkerEvicted');
    const expired = events.filter((event) => event.type === 'SessionExpired').length;
    if (evicted) {
      this.problems.delete(workerId);
      logger.warn(
        { workerId, consecutive, problem, sessionsExpired: expired },
        'worker evicted: health probes failed',
      );
    } else {
      logger.warn({ workerId, consecutive, problem }, 'worker health probe failed');
    }
  }
}
