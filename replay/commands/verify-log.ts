/**
 * `replay verify`'s pass over a log, on the machine's cores: the log is cut at snapshots into
 * ranges; this thread verifies the first while a worker thread verifies each of the others from
 * the snapshot it starts at (`verify-range.ts`). At the first seam the ranges are joined: each
 * range must have started from the state the range before it ended with (their digests), under
 * the same rules version, and have read nothing of the replayer's own maps (the calls it saw
 * requested, where each was placed) that the whole replay would have found otherwise. Then the
 * counts add up to what one pass counts. When a seam does not hold (a divergence, which one pass
 * then reports and explains; a decision across a seam; a snapshot that is not the fold's state),
 * this thread goes on past the seam in one pass, as if there had been no ranges: the answer is
 * always one pass's.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { isJetStreamLocation, type ClusterEvent } from '../../src/events/index.js';
import type { CallResult } from '../engine/call-result.js';
import { stateDigest } from '../engine/seam-digest.js';
import { joined, seamHolds } from '../engine/seam-map.js';
import { openLogSource, type LogSource } from '../io/log-source.js';
import { progressFor } from '../io/progress.js';
import type { SourceOptions } from './options.js';
import type { RangeResult, RangeTask } from './verify-range.js';
import { VerifyTally, type OtherDivergence, type VerifyCounts } from './verify-tally.js';

/** How to verify. */
export interface VerifyLogOptions extends SourceOptions {
  readonly rules?: 'recorded' | 'current';
  /** At most how many ranges are verified at once (default `defaultJobs()`; 1: one pass). */
  readonly jobs?: number;
  /** The last seq to verify (default: the log's last). */
  readonly toSeq?: number;
  /**
   * The fewest events a range holds (default 100,000: below that, one pass is done before a
   * thread has loaded the code).
   */
  readonly minRangeEvents?: number;
}

/** What a verify found. */
export interface VerifyOutcome {
  readonly counts: VerifyCounts;
  readonly divergence: CallResult | undefined;
  readonly otherDivergence: OtherDivergence | undefined;
  /** How many ranges the answer was put together from (1: one pass). */
  readonly ranges: number;
  /** The seqs the ranges after the first started at (empty: one pass was all it tried). */
  readonly seams: readonly number[];
}

/** The fewest events worth a thread of their own: below, one pass is done before it starts. */
const MIN_RANGE_EVENTS = 100_000;

/**
 * How much longer the first range is than each other: a thread first loads the code (about half
 * a second), while this thread has it and starts at once.
 */
const FIRST_RANGE_WEIGHT = 1.2;

/**
 * How many ranges at most by default: the machine's cores less one, at least one. One pass
 * already keeps more than a core busy (the garbage collector's helpers, decompression), and a
 * range beside it on the last core is slowed more than it gains: on 2 cores, two ranges took as
 * long as one pass or longer, with 20-70 % more CPU (docs/replay.md).
 */
export function defaultJobs(): number {
  return Math.max(1, availableParallelism() - 1);
}

/** Verifies the log at `paths`. */
export async function verifyLog(
  paths: string | readonly string[],
  options: VerifyLogOptions = {},
): Promise<VerifyOutcome> {
  const list = typeof paths === 'string' ? [paths] : [...paths];
  const rules = options.rules ?? 'recorded';
  const source = await openLogSource(list, options);
  const progress = progressFor(source);
  const tally = new VerifyTally(rules);
  const threads: RangeThread[] = [];
  let ranges = 1;
  let seams: number[] = [];
  // A log of events (not JSONL text, whose range only its reading tells) as it is now: a live log
  // written meanwhile is read to here, in every range alike.
  const counted = source.size.unit === 'events';
  const last = options.toSeq ?? (counted ? source.range?.last : undefined);
  try {
    const split =
      counted && !options.skipDamaged && !list.some((path) => isJetStreamLocation(path));
    seams = split
      ? await seamsOf(source, options.jobs ?? defaultJobs(), { ...options, toSeq: last })
      : [];
    let reported = 0;
    const threadProgress = (events: number) => {
      reported += events;
      progress.advance(events);
    };
    seams.forEach((from, index) =>
      threads.push(
        startRange(
          { paths: list, rules, from, next: seams[index + 1], toSeq: last },
          threadProgress,
        ),
      ),
    );
    let seam = seams[0];
    let whole = false;
    /** Snapshots read at or past the seam (one pass folds them: the seam is then not joined). */
    const held: ClusterEvent[] = [];
    const push = (event: ClusterEvent) => {
      progress.event();
      tally.replayer.push(event);
      return !tally.found;
    };
    reading: for await (const batch of source.batches(0, (read) => progress.bytes(read), true)) {
      for (const event of batch) {
        if (last !== undefined && event.seq > last) break reading;
        if (seam !== undefined && event.seq >= seam) {
          if (event.type === 'Snapshot') {
            held.push(event);
            continue;
          }
          if (
            held.length === 0 &&
            tally.replayer.settleBefore(event) &&
            !tally.found &&
            (await joinRanges(tally, threads))
          ) {
            whole = true;
            ranges = threads.length + 1;
            break reading;
          }
          // The seam does not hold: one pass through the rest, from where this one stopped.
          seam = undefined;
          for (const thread of threads) thread.stop();
          progress.advance(-reported);
          for (const snapshot of held.splice(0)) if (!push(snapshot)) break reading;
        }
        if (!push(event)) break reading;
      }
    }
    if (!whole) {
      // The log ended past the seam with snapshots alone.
      if (!tally.found) for (const snapshot of held.splice(0)) if (!push(snapshot)) break;
      tally.end();
    }
  } finally {
    for (const thread of threads) thread.stop();
    progress.stop();
    await source.close();
  }
  return {
    counts: tally.counts,
    divergence: tally.divergence,
    otherDivergence: tally.otherDivergence,
    ranges,
    seams,
  };
}

/**
 * Where the log is cut (the snapshots the ranges after the first start at): up to `jobs` ranges of
 * at least `minRangeEvents` events each; none when the log is too short or has no snapshots.
 */
async function seamsOf(
  source: LogSource,
  jobs: number,
  { toSeq, minRangeEvents = MIN_RANGE_EVENTS }: VerifyLogOptions,
): Promise<number[]> {
  const range = source.range;
  if (range === undefined || jobs < 2) return [];
  const last = Math.min(range.last, toSeq ?? range.last);
  const events = last - range.first + 1;
  const count = Math.min(jobs, Math.floor(events / minRangeEvents));
  if (count < 2) return [];
  const share = events / (FIRST_RANGE_WEIGHT + count - 1);
  const seams: number[] = [];
  for (let index = 0; index < count - 1; index += 1) {
    const target = range.first + Math.round(share * (FIRST_RANGE_WEIGHT + index));
    const at = await source.snapshotAtOrBefore(target);
    if (at !== undefined && at > (seams.at(-1) ?? range.first) && at <= last) seams.push(at);
  }
  return seams;
}

/**
 * Joins the ranges to the first at the first seam (this thread's replayer holds the log's state up
 * to it); whether every seam holds, the counts then added to the first range's.
 */
export async function joinRanges(
  tally: VerifyTally,
  threads: readonly RangeThread[],
): Promise<boolean> {
  const { replayer } = tally;
  let digest: string | null = stateDigest(replayer.state);
  let version = replayer.seam.recordedVersion;
  let calls = replayer.seam.calls.entries();
  let placements = replayer.seam.placements.entries();
  const results: RangeResult[] = [];
  // A thread that fails ends the join at once, whichever range it verifies.
  const failed = new Promise<null>((resolve) => {
    for (const thread of threads) thread.result.catch(() => resolve(null));
  });
  // In order, each as soon as it is in: the first seam that does not hold ends the join (the
  // caller stops the threads still running) without waiting for the ranges after it.
  for (const thread of threads) {
    const result = await Promise.race([thread.result, failed]).catch(() => null);
    if (result === null) return false;
    results.push(result);
    const holds =
      result.unusable === null &&
      result.startDigest === digest &&
      result.startVersion === version &&
      seamHolds(calls, result.calls.reads) &&
      seamHolds(placements, result.placements.reads);
    if (!holds) return false;
    digest = result.endDigest;
    version = result.endVersion;
    if (result.calls.writes) calls = joined(calls, result.calls.writes);
    if (result.placements.writes) placements = joined(placements, result.placements.writes);
  }
  for (const { counts } of results) {
    tally.counts.checked += counts.checked;
    tally.counts.unrecorded += counts.unrecorded;
    tally.counts.others += counts.others;
    tally.counts.undecidedDials += counts.undecidedDials;
  }
  tally.counts.undecidedDials += replayer.undecidedDials;
  return true;
}

/** A range verified in a worker thread. */
export interface RangeThread {
  readonly result: Promise<RangeResult>;
  stop(): void;
}

function startRange(task: RangeTask, progress: (events: number) => void): RangeThread {
  const thread = new Worker(new URL('./verify-thread-start.js', import.meta.url), {
    workerData: { task },
  });
  const result = new Promise<RangeResult>((resolve, reject) => {
    thread.on('message', (message: { progress?: number; result?: RangeResult }) => {
      if (message.result !== undefined) resolve(message.result);
      else if (message.progress !== undefined) progress(message.progress);
    });
    thread.on('error', reject);
    thread.on('exit', (code) => reject(new Error(`a verify thread exited with status ${code}`)));
  });
  // A verify that stops before the seam never asks for the result.
  result.catch(() => undefined);
  return { result, stop: () => void thread.terminate() };
}
