/**
 * Runs the pure reaper every `REAPER_INTERVAL` and appends what it returns (shell). Time comes
 * from the router's clock, the same one that stamps the log.
 */
import type { NewEvent } from '../../events/index.js';
import type { Config } from '../../shared/config.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import { decide } from '../../core/decisions.js';

/** What the reaper timer needs. */
export interface ReaperTimerOptions {
  readonly journal: Journal;
  readonly config: Config;
  readonly clock: () => number;
  readonly logger: Logger;
  /**
   * Told after every pass, whether or not it appended: the router then closes the channels of
   * workers no longer live, however they left (reaped, evicted by probes, deregistered).
   */
  readonly onPass?: () => void;
}

/** The reaper's timer. */
export class ReaperTimer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: ReaperTimerOptions) {}

  /** Starts reaping every `REAPER_INTERVAL`. */
  start(): void {
    this.schedule();
  }

  /** Stops reaping. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One reaper pass now; returns the events it appended. */
  reapNow(): readonly NewEvent[] {
    const { journal, config, clock, logger } = this.options;
    const decision = decide('reaper', journal.state, { now: clock(), config });
    const { events } = decision;
    try {
      journal.record(decision);
    } catch (error) {
      logger.error({ err: error }, 'could not record what the reaper found');
      return [];
    }
    for (const event of events) logReaped(logger, event);
    return events;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.reapNow();
      this.options.onPass?.();
      this.schedule();
    }, this.options.config.REAPER_INTERVAL);
  }
}

function logReaped(logger: Logger, event: NewEvent): void {
  if (event.type === 'WorkerEvicted') {
    logger.warn({ workerId: event.workerId, reason: event.reason }, 'worker evicted by the reaper');
  } else if (event.type === 'ContainerForgotten') {
    logger.info(
      { workerId: event.workerId, containerId: event.containerId, reason: event.reason },
      'container forgotten by the reaper',
    );
  } else if (event.type === 'ReservationExpired') {
    logger.warn({ requestId: event.requestId }, 'stale reservation force-released');
  } else if (event.type === 'SessionExpired' || event.type === 'SessionUnpinned') {
    logger.info({ sessionId: event.sessionId, reason: event.reason }, `session: ${event.type}`);
  }
}
