/** Feeding a log source through a callback, with progress, up to an optional stopping point. */
import type { ClusterEvent } from '../../src/events/index.js';
import type { LogSource } from './log-source.js';
import { progressFor } from './progress.js';

/**
 * Streams every event of `source` (from `fromSeq`) to `visit`; `visit` returns false to stop.
 * `skipSnapshots`: `visit` folds every event, so the snapshots after the first may be passed over
 * (they cost a decode and a restore each, for the state the fold has already).
 */
export async function forEachEvent(
  source: LogSource,
  visit: (event: ClusterEvent) => boolean | void,
  fromSeq = 0,
  skipSnapshots = false,
): Promise<void> {
  const progress = progressFor(source);
  try {
    reading: for await (const batch of source.batches(
      fromSeq,
      (read) => progress.bytes(read),
      skipSnapshots,
    )) {
      for (const event of batch) {
        progress.event();
        if (visit(event) === false) break reading;
      }
    }
  } finally {
    progress.stop();
  }
}
