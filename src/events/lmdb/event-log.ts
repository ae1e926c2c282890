/**
 * The event log over LMDB: in the `events` database one key per `seq`, the value the event's
 * exact JSON text; beside it `snapshots` (the seqs of `Snapshot` events) and `meta` (the schema
 * version).
 *
 * Durability: `append` returns two promises. `committed` resolves when the LMDB transaction that
 * holds the events has committed: they are visible to every reader, in this process and others,
 * and survive the writer process being killed. `durable` resolves when that transaction has also
 * been flushed to disk (fsync), so it survives a machine crash or power loss. Appends made in the
 * same event-loop turn share one transaction.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { decodeEvent, encodeEvent, SeqOrder } from '../decode.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { AppendResult, EventLogBackend } from '../event-log.js';
import { FoldingLog, type FoldingLogOptions } from '../log/folding-log.js';
import { EVENT_SCHEMA_VERSION } from '../schema.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';
import { upcaster } from '../upcast.js';
import { WriterLock } from './writer-lock.js';

/** How to open a log. */
export interface EventLogOptions<S> extends FoldingLogOptions<S> {
  /** Open for reading only, beside a writer in another process. Default false. */
  readonly readOnly?: boolean;
  /** How often `follow` looks for events written by another process, in ms. Default 100. */
  readonly pollInterval?: number;
}

const DATA_FILE = 'events.mdb';
const META_SCHEMA_VERSION = 'schemaVersion';

/** The event log of one directory. */
export class EventLog<S = never> extends FoldingLog<S> implements EventLogBackend<S> {
  /** Which store holds it. */
  readonly kind = 'lmdb' as const;
  private first: number | undefined;
  private failure: Error | undefined;
  private lastCommit: Promise<void> = Promise.resolve();

  private constructor(
    readonly dir: string,
    private readonly root: RootDatabase,
    private readonly events: Database<string, number>,
    private readonly snapshots: Database<boolean, number>,
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
      // lmdb passes `permissionsMode` to mdb_env_open: the data and lock files are created 0600.
      const root = open({
        path,
        readOnly,
        maxDbs: 4,
        permissionsMode: 0o600,
      } as RootDatabaseOptionsWithPath);
      if (!readOnly) tightenFiles(dir);
      const events = root.openDB<string, number>({ name: 'events', encoding: 'string' }) as
        Database<string, number> | undefined;
      const meta = root.openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' }) as
        Database<unknown, string> | undefined;
      const snapshots = root.openDB<boolean, number>({ name: 'snapshots', encoding: 'msgpack' }) as
        Database<boolean, number> | undefined;
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
      const log = new EventLog<S>(dir, root, events, snapshots, lock, options);
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
    const { events, at } = this.stamp(input, cause);
    let last: Promise<boolean> | undefined;
    for (const event of events) {
      last = this.store(event, encodeEvent(event));
      this.fold(event);
    }
    const snapshot = this.snapshotIfDue(at);
    if (snapshot) {
      last = this.store(snapshot.event, snapshot.text);
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
      last = this.store(event, text);
      this.fold(event);
    }
    return this.track(
      stored.map((s) => s.event),
      last,
    );
  }

  /** Reads events with `fromSeq <= seq <= toSeq`, validated, in order. */
  *read(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): Generator<ClusterEvent> {
    for (const stored of this.readStored(fromSeq, toSeq)) yield stored.event;
  }

  /** Reads events with their exact stored text, validated, in order. */
  *readStored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): Generator<StoredEvent> {
    const order = new SeqOrder();
    for (const { key, value } of this.events.getRange({ start: fromSeq, end: toSeq + 1 })) {
      const event = decodeEvent(value, { seq: key });
      if (event.seq !== key) {
        throw new InvalidEventError(
          { seq: key },
          'seq',
          `stored under seq ${key} but says ${event.seq}`,
        );
      }
      order.accept(event);
      yield { event, text: value };
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
      for (const event of this.read(next)) {
        yield event;
        next = event.seq + 1;
        if (signal?.aborted) return;
      }
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

  /** Stores one event (the caller folds it); a `Snapshot` is also indexed by its seq. */
  private store(event: ClusterEvent, text: string): Promise<boolean> {
    const write = this.events.put(event.seq, text);
    if (this.first === undefined) this.first = event.seq;
    if (event.type === 'Snapshot') void this.snapshots.put(event.seq, true);
    return write;
  }

  private track(events: readonly ClusterEvent[], last: Promise<boolean> | undefined): AppendResult {
    const committed = (last ?? this.lastCommit).then(
      () => this.wakeFollowers(),
      (error: Error) => {
        this.failure ??= error;
        throw new EventLogError(`event log ${this.dir} failed to commit: ${error.message}`);
      },
    );
    const settled = committed.catch(() => undefined);
    this.lastCommit = settled;
    // Most appenders never wait for the flush: its promise is made when first asked for.
    let durable: Promise<void> | undefined;
    const root = this.root;
    return {
      events,
      committed,
      get durable() {
        durable ??= committed.then(() => root.flushed).then(() => undefined);
        durable.catch(() => undefined);
        return durable;
      },
    };
  }

  /** Folds the log from its newest snapshot (or its start) to its end. */
  private foldCurrent(): void {
    this.resetFold(this.lastSnapshot ?? this.first ?? 1);
    for (const event of this.read(this.lastSnapshot ?? 0)) this.fold(event);
  }
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
