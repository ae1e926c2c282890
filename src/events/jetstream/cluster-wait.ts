/**
 * Waiting out a NATS cluster that is still coming up. Right after its nodes start (or restart
 * with their stores), a JetStream cluster first elects a meta leader and then a leader for each
 * stream and bucket, each election taking seconds (more under load): until then requests time
 * out, find no responders, or are answered "temporarily unavailable" or "no suitable peers". A
 * router (or `readie up`) that opens its log then waits and retries, up to a bounded time, and
 * then fails with `JetStreamUnavailableError`, naming the last problem and what to check.
 */
import { NoRespondersError, RequestError, TimeoutError } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import { EventLogError } from '../errors.js';

/** How long a router waits by default for its JetStream cluster to answer at start, in ms. */
export const DEFAULT_CLUSTER_WAIT_MS = 120_000;

/** How often a wait is reported, at most, after the first report (ms). */
const REPORT_EVERY_MS = 5_000;

/**
 * JetStream API codes a cluster answers while it elects or gathers its peers: 10008 "JetStream
 * system temporarily unavailable" (no leader), 10005 "no suitable peers for placement" and 10023
 * "insufficient resources" (not all peers known yet to place the replicas).
 */
const STARTING_CODES: ReadonlySet<number> = new Set([10008, 10005, 10023]);

/** The same troubles as words, for errors that reach us wrapped (e.g. in an EventLogError). */
const STARTING_WORDS =
  /\btimeout\b|timed out|no responders|temporarily unavailable|not enabled|no suitable peers|insufficient resources|connection refused|CONNECTION_REFUSED|ECONNREFUSED|\b503\b/i;

/**
 * Whether `error` is what a JetStream cluster that is still starting or electing answers (a
 * request timed out, no server answers JetStream's API yet, no leader, peers not yet known, no
 * node accepts connections yet), as opposed to a refusal that waiting does not change (bad
 * credentials or TLS, a stream of another shape, a corrupt log).
 */
export function isClusterStarting(error: unknown): boolean {
  if (error instanceof JetStreamApiError) return STARTING_CODES.has(error.code);
  if (
    error instanceof TimeoutError ||
    error instanceof NoRespondersError ||
    // No server answers JetStream's API yet ("jetstream is not enabled"); the class is not exported.
    (error instanceof Error && error.name === 'JetStreamNotEnabled') ||
    (error instanceof RequestError && error.isNoResponders())
  ) {
    return true;
  }
  if (error instanceof Error && error.cause !== undefined && isClusterStarting(error.cause)) {
    return true;
  }
  return error instanceof Error && STARTING_WORDS.test(error.message);
}

/** The cluster did not answer within the wait: its message says what was tried and what to check. */
export class JetStreamUnavailableError extends EventLogError {
  override readonly name = 'JetStreamUnavailableError';
  /** The gRPC code a router answers with while its log is unavailable. */
  readonly code = 'UNAVAILABLE' as const;
}

/** One report of a wait: what failed last and for how long this has waited so far. */
export interface ClusterWaitReport {
  readonly what: string;
  readonly problem: string;
  readonly waitedMs: number;
  readonly waitMs: number;
}

/** How to wait. */
export interface ClusterWaitOptions {
  /** What is being done, for messages: `open the event log nats://…/readie`. */
  readonly what: string;
  /** How long to keep retrying, in ms, from `startedAt`. */
  readonly waitMs: number;
  /** When the wait began, in epoch ms (a start of several steps shares one wait). Default: now. */
  readonly startedAt?: number;
  /** Told at the first failure and then every few seconds while waiting. */
  readonly onWait?: (report: ClusterWaitReport) => void;
  /** What the operator can change to wait longer (default: nothing named). */
  readonly waitSetting?: string;
  /** The clock, in epoch ms. Default `Date.now`. */
  readonly clock?: () => number;
}

/**
 * Runs `attempt` until it succeeds; an attempt that fails as a starting cluster does
 * (`isClusterStarting`) is retried, with a growing pause (250 ms to 2 s), until `waitMs` has
 * passed, and then the wait fails with `JetStreamUnavailableError`. Other failures are thrown as
 * they are, at once.
 */
export async function waitForCluster<T>(
  attempt: () => Promise<T>,
  options: ClusterWaitOptions,
): Promise<T> {
  const clock = options.clock ?? Date.now;
  const started = options.startedAt ?? clock();
  let reportedAt: number | undefined;
  for (let tries = 0; ; tries += 1) {
    try {
      return await attempt();
    } catch (error) {
      if (!isClusterStarting(error)) throw error;
      const problem = error instanceof Error ? error.message : String(error);
      const now = clock();
      const waitedMs = now - started;
      if (waitedMs >= options.waitMs) {
        throw new JetStreamUnavailableError(
          `could not ${options.what}: the NATS cluster did not answer JetStream requests within ` +
            `${formatSeconds(options.waitMs)} (last: ${problem}). Check that a majority of its ` +
            `nodes run, reach each other on their cluster ports and have JetStream enabled ` +
            `(nats-server's log says "new metadata leader" and "new stream leader" once they ` +
            `agree)${options.waitSetting ? `; ${options.waitSetting} sets how long to wait` : ''}`,
          { cause: error },
        );
      }
      if (reportedAt === undefined || now - reportedAt >= REPORT_EVERY_MS) {
        reportedAt = now;
        options.onWait?.({ what: options.what, problem, waitedMs, waitMs: options.waitMs });
      }
      const pause = Math.min(2_000, 250 * 2 ** Math.min(tries, 3));
      await new Promise((resolve) =>
        setTimeout(resolve, Math.min(pause, options.waitMs - waitedMs)),
      );
    }
  }
}

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
