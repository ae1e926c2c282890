/**
 * The router's call history (shell): the pure `CallHistory` fed every event its log folds, and
 * rebuilt at start from the log's tail (the snapshot a log opens from does not carry it).
 */
import type { EventLogBackend } from '../../events/index.js';
import type { LogProjection } from '../../events/projection.js';
import type { ClusterEvent } from '../../events/types.js';
import { CallHistory } from '../../projections/call-history.js';
import type { Config } from '../../shared/config.js';

/** How many events of the log's tail the start reads per call the history may hold. */
export const BACKFILL_EVENTS_PER_CALL = 8;

/** The history, and the hook that feeds it from the log's fold. */
export class HistoryFeed {
  readonly history: CallHistory;
  private feeding = false;

  constructor(config: Pick<Config, 'HISTORY_MAX_CALLS' | 'HISTORY_RETENTION'>) {
    this.history = new CallHistory({
      maxCalls: config.HISTORY_MAX_CALLS,
      retentionMs: config.HISTORY_RETENTION,
    });
  }

  /** `projection`, also telling the history of every event it folds once `backfill` is done. */
  wrap<S>(projection: LogProjection<S>): LogProjection<S> {
    return {
      ...projection,
      apply: (state, event) => {
        if (this.feeding) this.history.observe(event);
        return projection.apply(state, event);
      },
    };
  }

  /**
   * Reads the log's tail into the history (what the open folded from its snapshot went by before
   * the history listened), then listens to every event folded after. Resolves once done.
   */
  async backfill<S>(log: EventLogBackend<S>, clockMs: number): Promise<void> {
    const last = log.lastSeq;
    const first = log.firstSeq;
    if (first !== undefined && last >= first) {
      const window = this.history.bounds.maxCalls * BACKFILL_EVENTS_PER_CALL;
      const from = Math.max(first, last - window + 1);
      for await (const event of log.read(from, last) as AsyncIterable<ClusterEvent>) {
        this.history.observe(event);
      }
    }
    this.history.forgetDue(new Date(clockMs).toISOString());
    this.feeding = true;
  }
}
