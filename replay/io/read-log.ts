/** Feeding a log source through a callback, with progress, up to an optional stopping point. */
import type { ClusterEvent } from '../../src/events/index.js';
import type { LogSource } from './log-source.js';
import { progressFor } from './progress.js';

/** Streams every event of `source` (from `fromSeq`) to `visit`; `visit` returns false to stop. */
export async function forEachEvent(
  source: LogSource,
  visit: (event: ClusterEvent) => boolean | void,
  fromSeq = 0,
): Promise<void> {
  const progress = progressFor(source);
  try {
    for await (const event of source.events(fromSeq, (read) => progress.bytes(read))) {
      progress.event();
      if (visit(event) === false) break;
    }
  } finally {
    progress.stop();
  }
}
