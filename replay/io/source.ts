/** What replay reads a log through, whatever holds it (`log-source.ts` opens one). */
import type { ClusterEvent, StoredEvent } from '../../src/events/index.js';

/** A log to replay. */
export interface LogSource {
  readonly kind: 'lmdb' | 'jetstream' | 'jsonl' | 'archive';
  readonly path: string;
  /** How big it is, for progress: events for logs and archives, bytes for JSONL. */
  readonly size: { readonly unit: 'events' | 'bytes'; readonly total: number };
  /**
   * The events with seq >= `fromSeq` (default: all). `onBytes` reports JSONL bytes read so far.
   * `skipSnapshots`: the caller folds every event it reads, so a source may pass over the
   * `Snapshot` events after the first it yields (the fold has their state already).
   */
  events(
    fromSeq?: number,
    onBytes?: (bytes: number) => void,
    skipSnapshots?: boolean,
  ): AsyncIterable<ClusterEvent>;
  /** The same, a batch at a time (one step of the event loop a batch: what replay folds). */
  batches(
    fromSeq?: number,
    onBytes?: (bytes: number) => void,
    skipSnapshots?: boolean,
  ): AsyncIterable<readonly ClusterEvent[]>;
  /** The events `fromSeq` to `toSeq` with their stored text (export). */
  stored(fromSeq?: number, toSeq?: number): AsyncIterable<StoredEvent>;
  /**
   * A seq at or before `seq` that a fold may start at (a `Snapshot`, or the start of an archive
   * file), when the source knows one (LMDB, JetStream, archives).
   */
  snapshotAtOrBefore(seq: number): number | undefined | Promise<number | undefined>;
  /**
   * Where to start reading to find request `requestId` without folding what comes before: the
   * start of the first archive file that mentions it (each starts at a snapshot), else 0.
   */
  locate(requestId: string): Promise<number>;
  /** The first and last seq it holds (undefined when empty). */
  readonly range: { readonly first: number; readonly last: number } | undefined;
  /** Releases the source. */
  close(): Promise<void>;
}

/** How to open sources. */
export interface OpenOptions {
  /** Skip damaged or missing archive files (each reported on stderr) instead of refusing. */
  readonly skipDamaged?: boolean;
  /** Where a skipped range is reported (default: stderr). */
  readonly warn?: (line: string) => void;
}
