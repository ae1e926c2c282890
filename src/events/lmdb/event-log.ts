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
import { decodeEvent, encodeEvent, isoInstant, SeqOrder } from '../decode.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { AppendResult, EventLogBackend } from '../event-log.js';
import type { LogProjection } from '../projection.js';
import { EVENT_SCHEMA_VERSION } from '../schema.js';
import { snapshotDue, snapshotEvent, stampEvents } from '../stamp.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';
import { upcaster } from '../upcast.js';
import { WriterLock } from './writer-lock.js';

/** How to open a log. */
export interface EventLogOptions<S> {
  /** Open for reading only, beside a writer in another process. Default false. */
  readonly readOnly?: boolean;
  /** The clock that stamps `at`, in epoch milliseconds. Default `Date.now`. */
  readonly clock?: () => number;
  /** A fold to keep beside the log; needed for `state` and for snapshots. */
  readonly projection?: LogProjection<S>;
  /** Append a `Snapshot` after this many events since the last one; 0 never. Default 10,000. */
  readonly snapshotEvery?: number;
  /** How often `follow` looks for events written by another process, in ms. Default 100. */
  readonly pollInterval?: number;
}

const DATA_FILE = 'events.mdb';
const META_SCHEMA_VERSION = 'schemaVersion';

/** The event log of one directory. */
export class EventLog<S = never> implements EventLogBackend<S> {
  /** Which store holds it. */
  readonly kind = 'lmdb' as const;
  private nextSeq: number;
  private first: number | undefined;
  private lastSnapshot: number | undefined;
  private working: S | undefined;
  private failure: Error | undefined;
  private lastCommit: Promise<void> = Promise.resolve();
  private readonly commitWaiters = new Set<() => void>();
  private closed = false;

  private constructor(
    readonly dir: string,
    private readonly root: RootDatabase,
    private readonly events: Database<string, number>,
    private readonly snapshots: Database<boolean, number>,
    private readonly lock: WriterLock | undefined,
    private readonly options: EventLogOptions<S>,
  ) {
    const lastKey = first(events.getKeys({ reverse: true, limit: 1 }));
    this.first = first(events.getKeys({ limit: 1 }));
    this.nextSeq = lastKey === undefined ? 1 : lastKey + 1;
    this.lastSnapshot = first(snapshots.getKeys({ reverse: true, limit: 1 }));
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
      if (options.projection) log.working = log.foldCurrent(options.projection);
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

  /** The seq of the last appended event (0 for an empty log that starts at 1). */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /** The seq of the newest `Snapshot` at or before `seq` (default: the newest of all). */
  snapshotAtOrBefore(seq: number = Number.MAX_SAFE_INTEGER): number | undefined {
    return first(this.snapshots.getKeys({ start: seq, reverse: true, limit: 1 }));
  }

  /** The id of the last committed LMDB transaction (a diagnostic: batching shows in it). */
  get lastTransactionId(): number {
    return (this.root.getStats() as { lastTxnId: number }).lastTxnId;
  }

  /** The folded state after the last appended event. Needs a projection. */
  get state(): S {
    if (!this.options.projection)
      throw new EventLogError('this log was opened without a projection');
    return this.working as S;
  }

  /**
   * Appends events: assigns contiguous seqs, stamps `at` from the clock and `cause` (what caused
   * this append, e.g. `call:r1`; see `CAUSE_KINDS`), validates, stores and folds them. Every event
   * of one call shares one `at`, one `cause` and one transaction.
   */
  append(input: NewEvent | readonly NewEvent[], cause: string | null = null): AppendResult {
    this.assertWritable();
    const list: readonly NewEvent[] = Array.isArray(input) ? input : [input as NewEvent];
    const at = this.instant((this.options.clock ?? Date.now)());
    // Every event is validated before any is stored: a bad one refuses the whole call.
    const events = stampEvents(list, this.nextSeq, at, cause);
    let last: Promise<boolean> | undefined;
    for (const event of events) last = this.store(event, encodeEvent(event));
    const snapshot = this.snapshotIfDue(at);
    if (snapshot) {
      last = this.store(snapshot.event, snapshot.text, true);
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
    for (const { event, text } of stored) last = this.store(event, text);
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
      await this.nextCommit(signal);
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
    this.closed = true;
    for (const wake of this.commitWaiters) wake();
    try {
      if (!this.options.readOnly) await this.flushed().catch(() => undefined);
      await this.root.close();
    } finally {
      this.lock?.release();
    }
  }

  private assertWritable(): void {
    if (this.closed) throw new EventLogError(`event log ${this.dir} is closed`);
    if (this.options.readOnly) throw new EventLogError(`event log ${this.dir} is open read-only`);
    if (this.failure) {
      throw new EventLogError(
        `event log ${this.dir} failed to write earlier: ${this.failure.message}`,
      );
    }
  }

  /** `isoInstant(ms)`, remembered for the last millisecond asked (a busy log asks it again). */
  private instant(ms: number): string {
    if (ms !== this.lastInstant.ms) this.lastInstant = { ms, text: isoInstant(ms) };
    return this.lastInstant.text;
  }

  private lastInstant = { ms: NaN, text: '' };

  /** Stores an event and folds it; `own` marks the log's own snapshot of its working state. */
  private store(event: ClusterEvent, text: string, own = false): Promise<boolean> {
    const write = this.events.put(event.seq, text);
    if (this.first === undefined) this.first = event.seq;
    this.nextSeq = event.seq + 1;
    if (event.type === 'Snapshot') {
      void this.snapshots.put(event.seq, true);
      this.lastSnapshot = event.seq;
    }
    const { projection } = this.options;
    if (projection) {
      // Restoring a snapshot of the very state it was taken from would only rebuild that state.
      this.working = own
        ? projection.advance(this.working as S, event.seq)
        : projection.apply(this.working as S, event);
    }
    return write;
  }

  /** How many events the next snapshot waits at least: the last one's weight (`snapshotDue`). */
  private snapshotSpacing: number | undefined;

  private snapshotIfDue(at: string): StoredEvent | undefined {
    const { projection } = this.options;
    const every = this.options.snapshotEvery ?? 10_000;
    if (!projection) return undefined;
    this.snapshotSpacing ??= projection.weight?.(this.working as S) ?? 0;
    if (!snapshotDue(this.lastSeq, this.lastSnapshot, this.first, every, this.snapshotSpacing)) {
      return undefined;
    }
    this.snapshotSpacing = projection.weight?.(this.working as S) ?? 0;
    const event = snapshotEvent(this.nextSeq, at, projection.toSnapshot(this.working as S));
    return { event, text: encodeEvent(event) };
  }

  private track(events: readonly ClusterEvent[], last: Promise<boolean> | undefined): AppendResult {
    const committed = (last ?? this.lastCommit).then(
      () => {
        for (const wake of this.commitWaiters) wake();
      },
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

  private nextCommit(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.commitWaiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, this.options.pollInterval ?? 100);
      this.commitWaiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  private foldCurrent(projection: LogProjection<S>): S {
    let state = projection.initial();
    const from = this.lastSnapshot ?? 0;
    for (const event of this.read(from)) state = projection.apply(state, event);
    return state;
  }
}

function first<T>(iterable: Iterable<T>): T | undefined {
  for (const item of iterable) return item;
  return undefined;
}

/** Makes every file of a log directory root's alone (logs written before files were 0600). */
function tightenFiles(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile()) chmodSync(join(dir, entry.name), 0o600);
  }
}
