/**
 * The router's handle on its event log: every append is a core decision, recorded here with its
 * cause (a decision with no events appends nothing), timed into the append-latency metric, its
 * failed commit caught once. A log that failed to commit refuses every later append (its
 * in-memory state is ahead of the disk); the router then stops serving and must be restarted to
 * recover from the log.
 */
import {
  causeText,
  InvalidEventError,
  type AppendResult,
  type EventLogBackend,
} from '../../events/index.js';
import type { Decision } from '../../core/decision.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { LogUnavailableError } from '../../core/errors.js';
import type { Logger } from '../observability/logger.js';
import type { RouterMetrics } from '../observability/metrics.js';

/** What recording a decision with no events gives back: nothing stored, nothing to wait for. */
const NOTHING_APPENDED: AppendResult = Object.freeze({
  events: Object.freeze([]),
  committed: Promise.resolve(),
  durable: Promise.resolve(),
});

/** Appends events and reads the live state. */
export class Journal {
  private failure: Error | undefined;
  private readonly listeners: ((decision: Decision) => void)[] = [];

  constructor(
    private readonly log: EventLogBackend<ClusterState>,
    private readonly metrics: RouterMetrics,
    private readonly logger: Logger,
    private readonly onFailure: (error: Error) => void,
  ) {}

  /** The live folded state: read it, never keep it across an append if you need a stable view. */
  get state(): ClusterState {
    return this.log.state;
  }

  /** True once a commit failed: the router must restart. */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Appends a decision's events with its cause (validated, stamped, folded synchronously): the only
   * way the router changes its state. A decision with no events appends nothing and tells no
   * listener (its `committed` is already resolved, even once the log has failed: nothing of it can
   * be lost). Throws `LogUnavailableError` once the log has failed. Callers that must not act
   * before the events survive a crash await `committed`.
   */
  record(decision: Decision): AppendResult {
    const { events, cause } = decision;
    if (events.length === 0) return NOTHING_APPENDED;
    if (this.failure) {
      throw new LogUnavailableError(
        `the event log failed earlier (${this.failure.message}): the router must restart`,
      );
    }
    const started = performance.now();
    let result: AppendResult;
    try {
      result = this.log.append(events, causeText(cause));
    } catch (error) {
      // An event that does not fit the vocabulary is a bug in the caller, not a broken log.
      if (error instanceof InvalidEventError) throw error;
      this.fail(error as Error);
      throw new LogUnavailableError(`the event log refused an append: ${(error as Error).message}`);
    }
    result.committed.then(
      () => this.metrics.appendLatency.observe((performance.now() - started) / 1000),
      (error: Error) => this.fail(error),
    );
    for (const listener of this.listeners) listener(decision);
    return result;
  }

  /**
   * Calls `listener` after every recorded decision (folded, not yet committed), synchronously:
   * for shells that act on what was appended (telling workers what to keep). A listener that
   * records a decision of its own is called again for it.
   */
  onRecorded(listener: (decision: Decision) => void): void {
    this.listeners.push(listener);
  }

  /** Resolves when every append so far is flushed to disk. */
  flushed(): Promise<void> {
    return this.log.flushed();
  }

  /** Stops the journal from outside (the router lost its lease): as a failed commit does. */
  stop(error: Error): void {
    this.fail(error);
  }

  private fail(error: Error): void {
    if (this.failure) {
      // An append still in flight when the router stopped (a partition cut it off mid-append):
      // its refusal (the fence: another router appended) is worth a line; nothing of it is kept.
      if (error !== this.failure) {
        this.logger.warn(
          { err: error },
          'event log refused an append made before the router stopped',
        );
      }
      return;
    }
    this.failure = error;
    this.logger.fatal({ err: error }, 'event log append failed: the router stops serving');
    this.onFailure(error);
  }
}
