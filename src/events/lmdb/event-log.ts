/**
 * The event log over LMDB: in the `events` database one key per `seq`, the value the event in the
 * binary codec (`codec/stored-codec.ts`), or its exact JSON text when the codec would not give
 * that text back (an imported event in the documented vocabulary, a `Snapshot`); beside it
 * `snapshots` (the seqs of `Snapshot` events), `archives` (the seq ranges `LogSegmentArchived`
 * events cover) and `meta` (the schema version, the value format, the log's origin). A log
 * written before the codec holds JSON text only and reads as it is; its next appends are binary.
 *
 * Durability: `append` returns two promises. `committed` resolves when the LMDB transaction that
 * holds the events has committed: they are visible to every reader, in this process and others,
 * and survive the writer process being killed. `durable` resolves when that transaction has also
 * been flushed to disk (fsync), so it survives a machine crash or power loss. Appends made in the
 * same event-loop turn share one transaction.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { ByteWriter } from '../codec/byte-buffers.js';
import { dataFileProblem } from './data-file.js';
import { CanonicalInstant } from '../codec/event-codec.js';
import {
  isValueFormatName,
  NEWEST_VALUE_FORMAT_NAME,
  VALUE_FORMAT_NAMES,
  type ValueFormatName,
} from '../codec/field-codecs.js';
import {
  decodeLogValue,
  encodeLogValue,
  InstantCache,
  isSnapshotValue,
  type EncodeMode,
} from '../codec/stored-codec.js';
import { SeqOrder } from '../decode.js';
import { EventLogError, InvalidEventError, LogGapError } from '../errors.js';
import type { AppendResult, EventLogBackend, LogOrigin, ReadOptions } from '../event-log.js';
import { FoldingLog, type FoldingLogOptions } from '../log/folding-log.js';
import { EVENT_SCHEMA_VERSION } from '../schema.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';
import { upcaster } from '../upcast.js';
import { RecentWrites } from './recent-writes.js';
import { WriterLock } from './writer-lock.js';

/** How to open a log. */
export interface EventLogOptions<S> extends FoldingLogOptions<S> {
  /** Open for reading only, beside a writer in another process. Default false. */
  readonly readOnly?: boolean;
  /** How often `follow` looks for events written by another process, in ms. Default 100. */
  readonly pollInterval?: number;
  /**
   * Told when events whose commit had succeeded were found missing from the log and stored
   * again (see `recent-writes.ts`). Default: a process warning naming the log and the seqs.
   */
  readonly onLostCommit?: (lost: LostCommit) => void;
}

/** Events found missing after their commit and stored again. */
export interface LostCommit {
  readonly dir: string;
  readonly fromSeq: number;
  readonly toSeq: number;
  readonly count: number;
}

/** What the writer needs to store an event again. */
interface Rewrite {
  readonly event: ClusterEvent;
  readonly text: string | undefined;
  readonly mode: EncodeMode;
}

const DATA_FILE = 'events.mdb';
const META_SCHEMA_VERSION = 'schemaVersion';
const META_VALUE_FORMAT = 'valueFormat';
const META_ORIGIN = 'origin';
/** Events a follower reads in one turn before it hands them out. */
const FOLLOW_CHUNK = 1024;
/** Writes of one event turn queued before lmdb-js starts its write thread on them (see `open`). */
const WRITES_BEFORE_THE_WRITER_STARTS = 100_000;
/**
 * The format of the values this code writes: the binary codec's value format 5, or JSON text
 * (each value says which by its first byte). A log without the marker was written before the
 * codec: JSON only. A log marked with an older format of the codec (1 to 4) is read as it is (its
 * values say their format) and marked format 5 once this code may write to it, so a readie that
 * reads only older formats refuses it by name instead of failing at its first new value.
 */
export const VALUE_FORMAT: ValueFormatName = NEWEST_VALUE_FORMAT_NAME;

/** The event log of one directory. */
export class EventLog<S = never> extends FoldingLog<S> implements EventLogBackend<S> {
  /** Which store holds it. */
  readonly kind = 'lmdb' as const;
  private first: number | undefined;
  private failure: Error | undefined;
  private lastCommit: Promise<void> = Promise.resolve();
  /** The newest appends, checked after each commit: see `recent-writes.ts`. */
  private readonly recent = new RecentWrites<Rewrite>();
  private committedThrough = 0;
  private checkQueued = false;

  private readonly scratch = new ByteWriter(4096);
  /** The instant of the last append, checked canonical once for all its events. */
  private readonly canonical = new CanonicalInstant();
  /** The commit the appends of this LMDB transaction share (see `track`). */
  private batch: CommitBatch | undefined;

  private constructor(
    readonly dir: string,
    private readonly root: RootDatabase,
    private readonly events: Database<Buffer, number>,
    private readonly snapshots: Database<boolean, number>,
    private readonly archives: Database<number, number>,
    private readonly meta: Database<unknown, string>,
    private readonly lock: WriterLock | undefined,
    protected override readonly options: EventLogOptions<S>,
  ) {
    const lastKey = firstOf(events.getKeys({ reverse: true, limit: 1 }));
    super(options, lastKey ?? 0, firstOf(snapshots.getKeys({ reverse: true, limit: 1 })));
    this.first = firstOf(events.getKeys({ limit: 1 }));
  }

  /**
   * Opens (creating if needed, unless read-only) the log in `dir`. A writer takes the directory's
   * writer lock; a second writer gets an `EventLogError`. With a projection, the current state is
   * rebuilt from the newest snapshot plus the tail before this returns.
   */
  static open<S = never>(dir: string, options: EventLogOptions<S> = {}): EventLog<S> {
    const readOnly = options.readOnly ?? false;
    const path = join(dir, DATA_FILE);
    if (readOnly && !existsSync(path)) throw new EventLogError(`no event log at ${dir}`);
    if (!readOnly) {
      // The log holds every session ID: root's alone (a directory from an older run is tightened).
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
    }
    const lock = readOnly ? undefined : WriterLock.acquire(dir);
    try {
      const problem = dataFileProblem(path, readOnly);
      if (problem !== undefined) {
        throw new EventLogError(
          readOnly
            ? `event log ${dir} is not readable: ${DATA_FILE} ${problem}: a log still being created, or a damaged one`
            : `event log ${dir} is damaged: ${DATA_FILE} ${problem}: move the directory aside (its archive files, if any, still replay) and restore the log from a backup`,
        );
      }
      // lmdb passes `permissionsMode` to mdb_env_open: the data and lock files are created 0600.
      const root = open({
        path,
        readOnly,
        maxDbs: 5,
        permissionsMode: 0o600,
        // The writes of one event turn share a transaction. lmdb-js starts its write thread on
        // them once 1,000 are queued, and then wakes it for every later write of the turn (a
        // futex call each, and a thread switch on a small host): a turn that decides many calls
        // (admission after a burst of finishes, an import) pays more for the wakes than for the
        // writes. The thread starts at the end of the turn instead, or after this many writes.
        batchStartThreshold: WRITES_BEFORE_THE_WRITER_STARTS,
      } as RootDatabaseOptionsWithPath);
      if (!readOnly) tightenFiles(dir);
      const events = root.openDB<Buffer, number>({ name: 'events', encoding: 'binary' }) as
        Database<Buffer, number> | undefined;
      const meta = root.openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' }) as
        Database<unknown, string> | undefined;
      const snapshots = root.openDB<boolean, number>({ name: 'snapshots', encoding: 'msgpack' }) as
        Database<boolean, number> | undefined;
      // A log written before archiving has no `archives` database: read-only, none is needed.
      const archives = root.openDB<number, number>({ name: 'archives', encoding: 'msgpack' }) as
        Database<number, number> | undefined;
      // Read-only, lmdb-js gives no database that does not exist yet: a writer is still
      // creating this log (or it is not one).
      if (!events || !meta || !snapshots) {
        void root.close();
        throw new EventLogError(`event log ${dir} is not initialized yet (no events written)`);
      }
      const version = meta.get(META_SCHEMA_VERSION);
      if (version === undefined) {
        if (!readOnly) meta.putSync(META_SCHEMA_VERSION, EVENT_SCHEMA_VERSION);
      } else {
        upcaster(Number(version));
      }
      const format = meta.get(META_VALUE_FORMAT);
      if (format !== undefined && !isValueFormatName(format)) {
        void root.close();
        throw new EventLogError(
          `event log ${dir} stores its events as ${JSON.stringify(format)}, which this readie cannot read (it reads ${Object.keys(VALUE_FORMAT_NAMES).join(', ')} and JSON text): use the readie that wrote it`,
        );
      }
      if (format !== VALUE_FORMAT && !readOnly) meta.putSync(META_VALUE_FORMAT, VALUE_FORMAT);
      const log = new EventLog<S>(
        dir,
        root,
        events,
        snapshots,
        archives ?? emptyIndex(),
        meta,
        lock,
        options,
      );
      if (!readOnly) log.recordOrigin();
      if (options.projection) log.foldCurrent();
      return log;
    } catch (error) {
      lock?.release();
      throw error;
    }
  }

  /** The directory, for messages. */
  get location(): string {
    return this.dir;
  }

  /** The seq of the first event, or undefined for an empty log. */
  get firstSeq(): number | undefined {
    return this.first;
  }

  /** The seq of the newest `Snapshot` at or before `seq` (default: the newest of all). */
  snapshotAtOrBefore(seq: number = Number.MAX_SAFE_INTEGER): number | undefined {
    return firstOf(this.snapshots.getKeys({ start: seq, reverse: true, limit: 1 }));
  }

  /** Which log this is: its first event, as recorded when it was stored. */
  origin(): LogOrigin | undefined {
    return this.meta.get(META_ORIGIN) as LogOrigin | undefined;
  }

  /** The bytes of the pages the events database uses (what `LOG_MAX_BYTES` bounds). */
  liveBytes(): number {
    const stats = this.events.getStats() as {
      pageSize: number;
      treeBranchPageCount: number;
      treeLeafPageCount: number;
      overflowPages: number;
    };
    return (
      stats.pageSize * (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages)
    );
  }

  /** The bytes the log's data file takes on disk (it does not shrink: freed pages are reused). */
  diskBytes(): number {
    const stat = statSync(join(this.dir, DATA_FILE));
    return stat.blocks * 512;
  }

  /** The seqs of the snapshots with `fromSeq <= seq <= toSeq`. */
  snapshotsBetween(fromSeq: number, toSeq: number): number[] {
    if (toSeq < fromSeq) return [];
    return [...this.snapshots.getKeys({ start: fromSeq, end: toSeq + 1 })];
  }

  /** The last seq a `LogSegmentArchived` in this log covers. */
  archivedThrough(): number | undefined {
    return firstOf(this.archives.getRange({ reverse: true, limit: 1 }))?.value;
  }

  /**
   * Deletes the events up to `seq` (their archive is written and logged), in one transaction:
   * the log then starts at `seq + 1`, which must be a `Snapshot` before the newest one or it.
   */
  async dropThrough(seq: number): Promise<void> {
    this.assertWritable();
    const first = this.first;
    if (first === undefined || seq < first) return;
    const newest = this.snapshotAtOrBefore();
    if (newest === undefined || seq >= newest) {
      throw new EventLogError(
        `event log ${this.dir}: will not drop seq ${first} to ${seq}: the newest snapshot (${newest ?? 'none'}) and what follows it stay live`,
      );
    }
    if (this.snapshots.get(seq + 1) === undefined) {
      throw new EventLogError(
        `event log ${this.dir}: will not drop seq ${first} to ${seq}: seq ${seq + 1} is not a snapshot, so the log would not start at one`,
      );
    }
    const snapshots = this.snapshotsBetween(first, seq);
    await this.root.transaction(() => {
      for (let key = first; key <= seq; key += 1) this.events.removeSync(key);
      for (const key of snapshots) this.snapshots.removeSync(key);
    });
    this.first = seq + 1;
    this.recent.forgetThrough(seq);
  }

  /** The id of the last committed LMDB transaction (a diagnostic: batching shows in it). */
  get lastTransactionId(): number {
    return (this.root.getStats() as { lastTxnId: number }).lastTxnId;
  }

  /**
   * Appends events: assigns contiguous seqs, stamps `at` from the clock and `cause` (what caused
   * this append, e.g. `call:r1`; see `CAUSE_KINDS`), validates, stores and folds them. Every event
   * of one call shares one `at`, one `cause` and one transaction.
   */
  append(input: NewEvent | readonly NewEvent[], cause: string | null = null): AppendResult {
    const { events, at, ms } = this.stamp(input, cause);
    let last: Promise<boolean> | undefined;
    for (const event of events) {
      last = this.store(event, undefined, 'append');
      this.fold(event);
    }
    const snapshot = this.snapshotIfDue(at, ms);
    if (snapshot) {
      last = this.store(snapshot.event, snapshot.text, 'exact');
      events.push(snapshot.event);
    }
    return this.track(events, last);
  }

  /**
   * Appends events already stamped elsewhere (an import), keeping their exact text. Their seqs
   * must continue this log's. No snapshot is added, so export after import gives the same bytes.
   */
  appendStored(stored: readonly StoredEvent[]): AppendResult {
    this.assertWritable();
    // Every seq is checked before any event is stored: a gap refuses the whole call.
    // An empty log takes the first event's seq (an exported range starts mid-log).
    const base = this.first === undefined ? (stored[0]?.event.seq ?? 0) : this.nextSeq;
    stored.forEach(({ event }, i) => {
      const expected = base + i;
      if (event.seq !== expected) {
        throw new InvalidEventError(
          { seq: event.seq },
          'seq',
          `does not continue the log: expected ${expected}`,
        );
      }
    });
    let last: Promise<boolean> | undefined;
    for (const { event, text } of stored) {
      last = this.store(event, text, 'exact');
      this.fold(event);
    }
    return this.track(
      stored.map((s) => s.event),
      last,
    );
  }

  /**
   * Read-only: later reads see every commit made so far by the writer (a handle keeps the
   * snapshot it last read otherwise). Keep one handle per reading process and refresh it rather
   * than opening the log again and again: see docs/event-log.md.
   */
  refresh(): void {
    if (this.options.readOnly) this.root.resetReadTxn();
  }

  /** Reads events with `fromSeq <= seq <= toSeq`, validated, in order. */
  *read(
    fromSeq = 0,
    toSeq = Number.MAX_SAFE_INTEGER,
    options: ReadOptions = {},
  ): Generator<ClusterEvent> {
    for (const stored of this.readStored(fromSeq, toSeq, options)) yield stored.event;
  }

  /**
   * Reads events with their exact stored text, validated, in order (`skipSnapshots`: every
   * `Snapshot` after the first event read is passed over undecoded).
   */
  *readStored(
    fromSeq = 0,
    toSeq = Number.MAX_SAFE_INTEGER,
    { skipSnapshots = false }: ReadOptions = {},
  ): Generator<StoredEvent> {
    const order = new SeqOrder();
    const instants = new InstantCache();
    let first = true;
    for (const { key, value } of this.events.getRange({ start: fromSeq, end: toSeq + 1 })) {
      if (skipSnapshots && !first && isSnapshotValue(value)) {
        order.skip(key);
        continue;
      }
      first = false;
      const before = order.lastSeq;
      if (before !== undefined && key > before + 1) throw new LogGapError(this.dir, before, key);
      const stored = decodeLogValue(value, key, instants);
      if (stored.event.seq !== key) {
        throw new InvalidEventError(
          { seq: key },
          'seq',
          `stored under seq ${key} but says ${stored.event.seq}`,
        );
      }
      order.accept(stored.event);
      yield stored;
    }
  }

  /**
   * Yields every event from `fromSeq` on, then each new one as it is committed, until `signal`
   * aborts. Events written by another process are picked up within `pollInterval`.
   */
  async *follow(fromSeq: number, signal?: AbortSignal): AsyncGenerator<ClusterEvent> {
    let next = fromSeq;
    while (!signal?.aborted && !this.closed) {
      if (this.options.readOnly) this.root.resetReadTxn();
      // A chunk is read at once, in one turn, then handed out: a range cursor held open across
      // the consumer's turns could meet a renewed read transaction (a reader following another
      // process's writer saw seq 4 then 7 under load).
      const chunk: ClusterEvent[] = [];
      for (const event of this.read(next)) {
        chunk.push(event);
        if (chunk.length === FOLLOW_CHUNK) break;
      }
      for (const event of chunk) {
        yield event;
        next = event.seq + 1;
        if (signal?.aborted) return;
      }
      if (chunk.length === FOLLOW_CHUNK) continue;
      await this.nextCommit(signal, this.options.pollInterval ?? 100);
    }
  }

  /** Resolves when every append so far is flushed to disk. */
  async flushed(): Promise<void> {
    await this.lastCommit;
    await this.root.flushed;
  }

  /** Flushes, closes the database and gives up the writer lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.markClosed();
    try {
      if (!this.options.readOnly) await this.flushed().catch(() => undefined);
      await this.root.close();
    } finally {
      this.lock?.release();
    }
  }

  /** A transaction that failed to commit stops the log writing. */
  protected writeRefusal(): Error | undefined {
    return this.failure && this.failedEarlier(this.failure);
  }

  /**
   * Stores one event (the caller folds it): a `Snapshot` is also indexed by its seq, a
   * `LogSegmentArchived` by the range it covers, and the log's first event is its origin.
   */
  private store(
    event: ClusterEvent,
    text: string | undefined,
    mode: EncodeMode,
    again = false,
  ): Promise<boolean> {
    const value = encodeLogValue(event, text, mode, this.scratch, this.canonical);
    const write = this.events.put(event.seq, value);
    if (!again) this.recent.add(event.seq, { event, text, mode });
    if (this.first === undefined) {
      this.first = event.seq;
      if (this.origin() === undefined) void this.meta.put(META_ORIGIN, originOf(event));
    }
    if (event.type === 'Snapshot') void this.snapshots.put(event.seq, true);
    if (event.type === 'LogSegmentArchived') void this.archives.put(event.fromSeq, event.toSeq);
    return write;
  }

  /** Records the origin of a log written before origins were (its first event is still there). */
  private recordOrigin(): void {
    if (this.origin() !== undefined || this.first === undefined) return;
    const [first] = this.read(this.first, this.first);
    if (first) this.meta.putSync(META_ORIGIN, originOf(first));
  }

  /**
   * The append's result. lmdb-js gives every write of one transaction the same promise, so the
   * appends of one transaction share one `committed` (made for the first of them) until it
   * resolves: then the guard checks through the last of them and followers wake, once per
   * commit instead of once per append (a write that gives an earlier promise again, already
   * resolved, starts a new batch).
   */
  private track(events: readonly ClusterEvent[], last: Promise<boolean> | undefined): AppendResult {
    const through = events.at(-1)?.seq;
    const batch = this.batch;
    if (last !== undefined && batch !== undefined && batch.write === last && !batch.settled) {
      if (through !== undefined) batch.through = through;
      return new Appended(events, batch.committed, this.root);
    }
    const next: CommitBatch = { write: last, through, settled: false, committed: LATER };
    next.committed = (last ?? this.lastCommit).then(
      () => {
        next.settled = true;
        if (next.through !== undefined) this.checkCommitted(next.through);
        this.wakeFollowers();
      },
      (error: Error) => {
        next.settled = true;
        this.failure ??= error;
        throw new EventLogError(`event log ${this.dir} failed to commit: ${error.message}`);
      },
    );
    this.batch = last === undefined ? undefined : next;
    this.lastCommit = next.committed.catch(() => undefined);
    return new Appended(events, next.committed, this.root);
  }

  /**
   * After a commit through `seq`: checks (once per turn) that every event kept in `recent` up to
   * the newest commit, and the one before them, is still in the log; stores the missing ones
   * again, and stops the log writing when the one before them is missing (it holds that one no
   * longer). See `recent-writes.ts`.
   */
  private checkCommitted(seq: number): void {
    this.committedThrough = Math.max(this.committedThrough, seq);
    if (this.checkQueued) return;
    this.checkQueued = true;
    queueMicrotask(() => {
      this.checkQueued = false;
      if (this.closed || this.failure) return;
      const through = this.committedThrough;
      // The event just before the ones kept was checked by the checks before: it cannot have
      // been lost as a commit is, and if it is gone anyway the writer cannot store it again.
      const kept = this.recent.firstKept;
      const before = kept === undefined || kept > through ? undefined : kept - 1;
      if (
        before !== undefined &&
        before >= (this.first ?? Infinity) &&
        !this.events.doesExist(before)
      ) {
        this.failure = new EventLogError(
          `event log ${this.dir} lost committed events up to seq ${before}, which this writer no longer holds: another process that opened the log while it was written (a read-only open repeated over and over) can make LMDB forget a commit; stop the writer and keep one read-only handle per reading process`,
        );
        return;
      }
      const lost = this.recent.missing(
        through,
        // Counted in LMDB, not listed: a few times cheaper, and this runs after every commit.
        (from, to) => this.events.getKeysCount({ start: from, end: to + 1 }),
        (from, to) => this.events.getKeys({ start: from, end: to + 1 }),
      );
      if (lost.length > 0) this.storeAgain(lost.map((held) => held.write));
    });
  }

  /** Stores again events whose commit was lost, and says so. */
  private storeAgain(lost: readonly Rewrite[]): void {
    const fromSeq = lost[0]?.event.seq ?? 0;
    const toSeq = lost.at(-1)?.event.seq ?? 0;
    let last: Promise<boolean> | undefined;
    for (const { event, text, mode } of lost) last = this.store(event, text, mode, true);
    const report: LostCommit = { dir: this.dir, fromSeq, toSeq, count: lost.length };
    (this.options.onLostCommit ?? warnLostCommit)(report);
    void last?.then(
      () => this.checkCommitted(toSeq),
      (error: Error) => {
        this.failure ??= error;
      },
    );
  }

  /** Folds the log from its newest snapshot (or its start) to its end. */
  private foldCurrent(): void {
    this.resetFold(this.lastSnapshot ?? this.first ?? 1);
    for (const event of this.read(this.lastSnapshot ?? 0)) this.fold(event);
  }
}

/** The appends of one LMDB transaction: its write promise, the last seq, their `committed`. */
interface CommitBatch {
  readonly write: Promise<boolean> | undefined;
  through: number | undefined;
  /** Whether its commit has resolved (or failed): later appends start a new batch. */
  settled: boolean;
  committed: Promise<void>;
}

/** A placeholder `committed` until the batch's own is made. */
const LATER: Promise<void> = Promise.resolve();

/**
 * What an append gave back. Most appenders never wait for the flush: `durable` is made when first
 * asked for.
 */
class Appended implements AppendResult {
  private flush: Promise<void> | undefined;

  constructor(
    readonly events: readonly ClusterEvent[],
    readonly committed: Promise<void>,
    private readonly root: RootDatabase,
  ) {}

  get durable(): Promise<void> {
    if (this.flush === undefined) {
      const root = this.root;
      this.flush = this.committed.then(() => root.flushed).then(() => undefined);
      this.flush.catch(() => undefined);
    }
    return this.flush;
  }
}

/** The origin a log whose first event is `event` records. */
function originOf(event: ClusterEvent): LogOrigin {
  return {
    id: randomBytes(8).toString('hex'),
    seq: event.seq,
    at: event.at,
    routerId: event.type === 'RouterStarted' ? event.routerId : null,
    stream: null,
  };
}

/** The default report of a lost commit: a process warning (the router prints it). */
function warnLostCommit(lost: LostCommit): void {
  process.emitWarning(
    `event log ${lost.dir}: ${lost.count} events (seq ${lost.fromSeq} to ${lost.toSeq}) had committed and then were missing from the log; they were stored again. Another process opening the log over and over while it is written causes this: keep one read-only handle per reading process.`,
    { code: 'READIE_LOST_COMMIT' },
  );
}

/** An index with nothing in it, for a read-only log written before it existed. */
function emptyIndex(): Database<number, number> {
  return {
    getRange: () => [],
    put: () => Promise.resolve(true),
  } as unknown as Database<number, number>;
}

function firstOf<T>(iterable: Iterable<T>): T | undefined {
  for (const item of iterable) return item;
  return undefined;
}

/** Makes every file of a log directory root's alone (logs written before files were 0600). */
function tightenFiles(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile()) chmodSync(join(dir, entry.name), 0o600);
  }
}
