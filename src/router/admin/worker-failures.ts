/**
 * The calls that failed on each worker, as this router process saw them end: what `readie status`
 * shows beside each worker (`WorkerView.recent_failures`, `failures`). Live facts of the process,
 * like the last probe's problem, not folded from the log: a router that restarts or takes the lead
 * starts with none. Bounded: the last few per worker, for a bounded number of workers.
 */
import type { WorkerFailure } from '../../proto/gen/readie/v1/admin.js';
import { BoundedMap } from '../../shared/bounded-map.js';

/** How many failures are kept per worker. */
export const RECENT_FAILURES_KEPT = 5;

/** How many workers' failures are kept (the oldest worker recorded goes first). */
const WORKERS_KEPT = 4_096;

/** How much of a failure's message is kept, in characters. */
const MESSAGE_KEPT = 300;

/** One worker's failures: the newest first, and how many since the router started. */
export interface WorkerFailureRecord {
  readonly recent: readonly WorkerFailure[];
  readonly count: number;
}

const NONE: WorkerFailureRecord = { recent: [], count: 0 };

/** The failures of calls per worker. */
export class WorkerFailures {
  readonly #byWorker = new BoundedMap<string, { recent: WorkerFailure[]; count: number }>(
    WORKERS_KEPT,
  );

  /** Records that a call placed on `workerId` ended with `failure` (a client's cancel is not one). */
  record(workerId: string, failure: WorkerFailure): void {
    if (failure.code === 'CANCELLED') return;
    let record = this.#byWorker.get(workerId);
    if (record === undefined) {
      record = { recent: [], count: 0 };
      this.#byWorker.set(workerId, record);
    }
    const message =
      failure.message.length > MESSAGE_KEPT
        ? `${failure.message.slice(0, MESSAGE_KEPT - 1)}…`
        : failure.message;
    record.recent.unshift({ ...failure, message });
    record.recent.length = Math.min(record.recent.length, RECENT_FAILURES_KEPT);
    record.count += 1;
  }

  /** `workerId`'s failures (none recorded: an empty record). */
  of(workerId: string): WorkerFailureRecord {
    return this.#byWorker.get(workerId) ?? NONE;
  }
}
