/**
 * The event log as every reader and the router's writer see it, whatever stores it: an LMDB
 * directory (`src/events/lmdb/`) or a NATS JetStream stream (`src/events/jetstream/`). New event
 * types need nothing from a backend: a backend stores and hands back event texts, validated by the
 * one vocabulary (`decode.ts`), and folds them with the projection it was given.
 */
import type { ClusterEvent, NewEvent, StoredEvent } from './types.js';

/** What an append gave back: the stamped events and the two promises of durability. */
export interface AppendResult {
  /** The events as stored, with their `seq` and `at`. */
  readonly events: readonly ClusterEvent[];
  /**
   * Resolves when the events are committed: visible to every reader and kept when the writer
   * process dies (LMDB: the transaction committed; JetStream: a quorum of replicas stored them).
   */
  readonly committed: Promise<void>;
  /** Resolves when the events also survive a machine crash (LMDB: fsync; JetStream: as committed). */
  readonly durable: Promise<void>;
}

/** How to read a log's events. */
export interface ReadOptions {
  /**
   * Pass over every `Snapshot` after the first event read, undecoded: a reader that folds every
   * event has their state already (a `Snapshot` stands for the events before it). A backend may
   * read them all the same.
   */
  readonly skipSnapshots?: boolean;
}

/** Which store holds a log. */
export type LogBackendKind = 'lmdb' | 'jetstream';

/**
 * Which log a log is, for its archive: its first event (seq, instant, and the router that wrote
 * it when it names one), on JetStream its stream, and a random ID drawn when it was recorded (two
 * logs whose first events are alike are still told apart). Recorded when the first event is
 * stored, so it outlives that event's segment; an archive directory holds one log's files only.
 */
export interface LogOrigin {
  /** Random, drawn when the origin was recorded; null when a reader had to derive it. */
  readonly id: string | null;
  readonly seq: number;
  readonly at: string;
  readonly routerId: string | null;
  readonly stream: string | null;
}

/** A log's origin in words, for messages. */
export function describeOrigin(origin: LogOrigin): string {
  const parts = [`first event seq ${origin.seq} at ${origin.at}`];
  if (origin.id !== null) parts.push(`log ${origin.id}`);
  if (origin.routerId !== null) parts.push(`router ${origin.routerId}`);
  if (origin.stream !== null) parts.push(`stream ${origin.stream}`);
  return parts.join(', ');
}

/** Whether two origins name the same log. */
export function sameOrigin(a: LogOrigin, b: LogOrigin): boolean {
  return (
    (a.id === null || b.id === null || a.id === b.id) &&
    a.seq === b.seq &&
    a.at === b.at &&
    a.routerId === b.routerId &&
    a.stream === b.stream
  );
}

/** An open event log: reading, following and, for a writer, appending. */
export interface EventLogBackend<S = never> {
  /** Which store holds it. */
  readonly kind: LogBackendKind;
  /** Where it is, for messages: a directory or a `nats://…/STREAM` location. */
  readonly location: string;
  /** The seq of the first event, or undefined for an empty log. */
  readonly firstSeq: number | undefined;
  /** The seq of the last event this handle knows (appended, read at open, or followed). */
  readonly lastSeq: number;
  /** The folded state after `lastSeq`. Needs a projection. */
  readonly state: S;
  /**
   * Appends one decision's events with its cause: stamps contiguous seqs and one `at`, validates,
   * folds them synchronously (the next caller sees them in `state`) and stores them as one unit.
   */
  append(input: NewEvent | readonly NewEvent[], cause?: string | null): AppendResult;
  /** Appends events stamped elsewhere (an import), keeping their exact text; seqs must continue. */
  appendStored(stored: readonly StoredEvent[]): AppendResult;
  /** Events with `fromSeq <= seq <= toSeq` (both inclusive), validated, in order. */
  read(
    fromSeq?: number,
    toSeq?: number,
    options?: ReadOptions,
  ): Iterable<ClusterEvent> | AsyncIterable<ClusterEvent>;
  /** The same with their exact stored text. */
  readStored(fromSeq?: number, toSeq?: number): Iterable<StoredEvent> | AsyncIterable<StoredEvent>;
  /** Every event from `fromSeq` on, then each new one as it is committed, until `signal` aborts. */
  follow(fromSeq: number, signal?: AbortSignal): AsyncIterable<ClusterEvent>;
  /** The seq of the newest `Snapshot` at or before `seq` (default: the newest of all). */
  snapshotAtOrBefore(seq?: number): number | undefined | Promise<number | undefined>;
  /** Which log this is (its first event), once it holds one. */
  origin(): LogOrigin | undefined | Promise<LogOrigin | undefined>;
  /** The bytes the live log holds (LMDB: its pages in use; JetStream: the stream's bytes). */
  liveBytes(): number | Promise<number>;
  /** The seqs of the `Snapshot` events with `fromSeq <= seq <= toSeq`, in order. */
  snapshotsBetween(fromSeq: number, toSeq: number): number[] | Promise<number[]>;
  /** The last seq a `LogSegmentArchived` of this log covers, if any. */
  archivedThrough(): number | undefined | Promise<number | undefined>;
  /**
   * Removes the events up to `seq` from the live store once their archive is written and logged:
   * LMDB deletes them; a JetStream stream drops them by its own limits (nothing to do here).
   * Refuses to remove the newest snapshot or anything after it.
   */
  dropThrough(seq: number): Promise<void>;
  /** Resolves when every append so far is durable. */
  flushed(): Promise<void>;
  /** Flushes what it can and releases the log (its lock, its connection). */
  close(): Promise<void>;
}
