/**
 * One range of a parallel `replay verify`: the part of a log from one of its snapshots to the next
 * range's, verified in a thread of its own beside the ranges before it. What it reports lets the
 * verify join it to the range before (`verify-log.ts`): the digest of the state it started from
 * and of the state it ended with, the rules version it knew at each, and what it read of the calls
 * and placements it never saw.
 */
import type { ClusterEvent } from '../../src/events/index.js';
import type { CallToPlace } from '../../src/core/placement/index.js';
import type { CallPlacement } from '../engine/append-check.js';
import { stateDigest } from '../engine/seam-digest.js';
import type { SeamRead, SeamWrites } from '../engine/seam-map.js';
import { openLogSource } from '../io/log-source.js';
import { VerifyTally, type VerifyCounts } from './verify-tally.js';

/** A range to verify. */
export interface RangeTask {
  readonly paths: readonly string[];
  readonly rules: 'recorded' | 'current';
  /** The seq of the snapshot it starts at. */
  readonly from: number;
  /** The seq of the snapshot the next range starts at; undefined for the last range. */
  readonly next: number | undefined;
  /** The last seq the whole verify reads (undefined: the log's end). */
  readonly toSeq: number | undefined;
}

/** What one of the replayer's maps saw of the range before. */
export interface RangeMap<V> {
  readonly reads: readonly SeamRead<V>[];
  /** What it wrote (for the range after it; undefined for the last range). */
  readonly writes: SeamWrites<V> | undefined;
}

/** What a range found. */
export interface RangeResult {
  readonly counts: VerifyCounts;
  /**
   * Why it cannot stand for its part of the verify (a divergence, which the verify then finds
   * and explains in one pass; a decision across its end; no snapshot at its start), or null.
   */
  readonly unusable: string | null;
  readonly startDigest: string | null;
  readonly startVersion: number | null;
  /** The state and rules version at its end (null for the last range). */
  readonly endDigest: string | null;
  readonly endVersion: number | null;
  readonly calls: RangeMap<CallToPlace>;
  readonly placements: RangeMap<CallPlacement>;
}

/** How often a range reports how many events it has read. */
const PROGRESS_EVERY = 20_000;

/** Verifies `task`'s range; `progress` hears of the events read as it goes. */
export async function verifyRange(
  task: RangeTask,
  progress: (events: number) => void = () => undefined,
): Promise<RangeResult> {
  const tally = new VerifyTally(task.rules, true);
  const { replayer } = tally;
  let start: { digest: string; version: number | null } | undefined;
  let end: { digest: string; version: number | null } | undefined;
  let unusable: string | null = null;
  let unreported = 0;
  const source = await openLogSource(task.paths);
  /** Takes in the next event; false once the range is done. */
  const visit = (event: ClusterEvent): boolean => {
    if (start === undefined) {
      if (event.type !== 'Snapshot' || event.seq !== task.from) {
        unusable = `no snapshot at seq ${task.from}`;
        return false;
      }
      replayer.push(event);
      start = { digest: stateDigest(replayer.state), version: replayer.seam.recordedVersion };
      return true;
    }
    if (task.toSeq !== undefined && event.seq > task.toSeq) return false;
    if (task.next !== undefined && event.seq >= task.next) {
      // The next range starts at its snapshot, which the source passes over here.
      if (event.type === 'Snapshot') return true;
      if (!replayer.settleBefore(event)) {
        unusable = `a decision continues past seq ${task.next}`;
      } else if (tally.found) {
        unusable = 'a divergence';
      } else {
        end = { digest: stateDigest(replayer.state), version: replayer.seam.recordedVersion };
      }
      return false;
    }
    if (event.type === 'Snapshot') {
      // The source passes over the snapshots after the first unless one pass must fold it (after
      // a part of the log that holds less): a range started elsewhere cannot stand for that.
      unusable = `a snapshot to fold at seq ${event.seq}`;
      return false;
    }
    replayer.push(event);
    if (!tally.found) return true;
    unusable = 'a divergence';
    return false;
  };
  try {
    reading: for await (const batch of source.batches(task.from, undefined, true)) {
      for (const event of batch) {
        if (!visit(event)) break reading;
        unreported += 1;
      }
      if (unreported >= PROGRESS_EVERY) {
        progress(unreported);
        unreported = 0;
      }
    }
  } finally {
    await source.close();
  }
  progress(unreported);
  if (task.next === undefined && unusable === null) {
    // The decision still open at the log's end is settled here, and may be the one that differs.
    tally.end();
    if (tally.found) unusable = 'a divergence';
  } else {
    tally.counts.undecidedDials = replayer.undecidedDials;
  }
  if (task.next !== undefined && end === undefined) {
    unusable ??= `the log ends before seq ${task.next}`;
  }
  const { calls, placements } = replayer.seam;
  const last = task.next === undefined;
  return {
    counts: tally.counts,
    unusable,
    startDigest: start?.digest ?? null,
    startVersion: start?.version ?? null,
    endDigest: end?.digest ?? null,
    endVersion: end?.version ?? null,
    calls: { reads: calls.reads, writes: last ? undefined : calls.written },
    placements: { reads: placements.reads, writes: last ? undefined : placements.written },
  };
}
