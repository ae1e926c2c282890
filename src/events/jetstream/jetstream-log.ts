/**
 * The event log on a NATS JetStream stream (replicated, e.g. R3 on a three-node cluster); the
 * layout is in `stream-format.ts`, reading it in `stream-reader.ts`.
 *
 * One writer, fenced (`fenced-publisher.ts`): every message is published with the stream sequence
 * it expects to follow. A writer knows the last message because it folded it, so the seqs it
 * stamps continue the log's; another writer that appended meanwhile makes the server refuse the
 * message, and with it every later one this writer had in flight. The log then fails
 * (`LogFencedError`): its folded state is ahead of the stream, and the router that holds it steps
 * down. Folding, snapshots and stamping are every backend's (`log/folding-log.ts`).
 *
 * `committed` and `durable` resolve together, on the stream's acknowledgement: JetStream answers
 * once a quorum of the stream's replicas stored the message.
 */
import { connect, nuid, type NatsConnection } from '@nats-io/transport-node';
import {
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { decodeEvent, encodeEvent, SeqOrder } from '../decode.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { AppendResult, EventLogBackend, LogOrigin } from '../event-log.js';
import { FoldingLog, type FoldingLogOptions } from '../log/folding-log.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';
import { upcaster } from '../upcast.js';
import { waitForCluster, type ClusterWaitReport } from './cluster-wait.js';
import { FencedPublisher, LogFencedError } from './fenced-publisher.js';
import { formatJetStreamLocation, type JetStreamLocation } from './location.js';
import {
  describeStream,
  formatSeqRange,
  parseSeqRange,
  readStreamRecord,
  SEQ_HEADER,
  STREAM_SCHEMA_VERSION,
  streamNames,
  type StreamNames,
  type StreamRecord,
} from './stream-format.js';
import { StreamReader, type StreamEvent } from './stream-reader.js';

export { LogFencedError } from './fenced-publisher.js';

/** How to open a JetStream log. */
export interface JetStreamLogOptions<S> extends FoldingLogOptions<S> {
  /**
   * The clock that stamps `at`, in epoch milliseconds, and that `open`'s wait counts by. Default
   * `Date.now`.
   */
  readonly clock?: () => number;
  /** Replicas of a stream this open creates (3 on a three-node cluster). Default 3. */
  readonly replicas?: number;
  /** The seq before the first event of a stream this open creates. Default 0. */
  readonly seqOffset?: number;
  /** Snapshots longer than this (bytes) go to the object store. Default: the server's limit less 64 KiB. */
  readonly inlineSnapshotLimit?: number;
  /** A connection to use (not closed by `close`); default: one of the log's own. */
  readonly connection?: NatsConnection;
  /** How long a JetStream request may take, in ms. Default 10 s. */
  readonly timeout?: number;
  /**
   * How long `open` retries while the cluster is still starting or electing (`cluster-wait.ts`),
   * in ms. Default 30 s.
   */
  readonly waitMs?: number;
  /** When that wait began, in epoch ms by `clock` (default: when `open` is called). */
  readonly waitStartedAt?: number;
  /** Told at the first failed attempt to open and every few seconds after, while waiting. */
  readonly onWait?: (report: ClusterWaitReport) => void;
  /** What sets `waitMs`, named in the error when the wait runs out (e.g. `--log-wait`). */
  readonly waitSetting?: string;
}

/** What a JetStream log keeps: its stream's limits, matching the router's retention. */
export interface StreamLimits {
  /** Messages older than this (ms) are dropped by the server; 0 keeps them. */
  readonly maxAgeMs: number;
  /** The oldest messages are dropped while the stream holds more bytes than this; 0: no bound. */
  readonly maxBytes: number;
}

/**
 * How much longer than the stream's messages the large snapshots' objects are kept: an object is
 * stored just before the message that names it, so it must not expire first.
 */
const OBJECT_AGE_MARGIN_MS = 3_600_000;

/** How long `open` waits by default for a cluster that is still starting. */
const OPEN_WAIT_MS = 30_000;
/** Room left in a message for its headers. */
const HEADROOM = 64 * 1024;

/** The event log on one JetStream stream. */
export class JetStreamEventLog<S = never> extends FoldingLog<S> implements EventLogBackend<S> {
  /** Which store holds it. */
  readonly kind = 'jetstream' as const;
  private readonly publisher: FencedPublisher;
  private readonly reader: StreamReader;
  private pending: Promise<void> = Promise.resolve();
  private objects: ObjectStore | undefined;
  private following: { stop: () => void; done: Promise<void> } | undefined;
  /** The first seq the stream held at open, when its limits had dropped the log's start. */
  private firstHeld: number | undefined;

  private constructor(
    readonly where: JetStreamLocation,
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: StreamNames,
    private readonly seqOffset: number,
    private record: StreamRecord,
    private readonly maxPayload: number,
    protected override readonly options: JetStreamLogOptions<S>,
    last: { streamSeq: number; seq: number },
  ) {
    super(options, last.seq, undefined);
    const location = formatJetStreamLocation(where);
    const objects = () => this.objectStore();
    this.publisher = new FencedPublisher(
      { js, jsm, stream: where.stream, location, objects },
      nuid.next(),
      last.streamSeq,
    );
    this.reader = new StreamReader({
      js,
      jsm,
      names,
      location,
      objects,
      closed: () => this.closed,
    });
  }

  /**
   * Opens (creating the stream if needed, unless read-only) the log at `where`. With a projection,
   * the state is folded from the newest snapshot plus the tail before this resolves.
   */
  static async open<S = never>(
    where: JetStreamLocation,
    options: JetStreamLogOptions<S> = {},
  ): Promise<JetStreamEventLog<S>> {
    // A cluster that just started (or restarted, or lost a node) elects leaders for seconds:
    // retry what a starting cluster answers, for up to `waitMs`.
    return waitForCluster(() => JetStreamEventLog.openOnce<S>(where, options), {
      what: `open the event log ${formatJetStreamLocation(where)}`,
      waitMs: options.waitMs ?? OPEN_WAIT_MS,
      ...(options.waitStartedAt === undefined ? {} : { startedAt: options.waitStartedAt }),
      ...(options.onWait ? { onWait: options.onWait } : {}),
      ...(options.waitSetting ? { waitSetting: options.waitSetting } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
    });
  }

  private static async openOnce<S>(
    where: JetStreamLocation,
    options: JetStreamLogOptions<S>,
  ): Promise<JetStreamEventLog<S>> {
    const text = formatJetStreamLocation(where);
    const timeout = options.timeout ?? 10_000;
    const nc =
      options.connection ??
      (await connect({
        servers: [...where.servers],
        name: 'readie-log',
        timeout,
        maxReconnectAttempts: -1,
      }).catch((error: Error) => {
        throw new EventLogError(`${text}: cannot reach NATS (${error.message})`, { cause: error });
      }));
    try {
      const jsm = await jetstreamManager(nc, { timeout });
      const js = jetstream(nc, { timeout });
      const names = streamNames(where.stream);
      let info = await jsm.streams.info(where.stream).catch((error: unknown) => {
        if (error instanceof JetStreamApiError && error.code === 10059) return undefined;
        throw error;
      });
      if (!info) {
        if (options.readOnly)
          throw new EventLogError(`${text}: no event log (no stream ${where.stream})`);
        info = await jsm.streams.add({
          name: where.stream,
          subjects: [names.eventsSubject, names.snapshotsSubject, names.archivedSubject],
          description: describeStream({
            schemaVersion: STREAM_SCHEMA_VERSION,
            seqOffset: options.seqOffset ?? 0,
          }),
          num_replicas: options.replicas ?? 3,
          deny_delete: true,
          deny_purge: true,
          allow_direct: true,
          duplicate_window: 120_000_000_000,
        });
      }
      const record = readStreamRecord(where.stream, info.config.description);
      upcaster(record.schemaVersion);
      const lastStreamSeq = info.state.last_seq;
      let lastSeq = record.seqOffset;
      let firstHeld: number | undefined;
      if (info.state.messages > 0) {
        const last = await jsm.streams.getMessage(where.stream, { seq: lastStreamSeq });
        if (!last) throw new EventLogError(`${text}: cannot read its last message`);
        lastSeq = parseSeqRange(last.header.get(SEQ_HEADER), last.seq).last;
        if (info.state.first_seq > 1) {
          const first = await jsm.streams.getMessage(where.stream, { seq: info.state.first_seq });
          if (first) firstHeld = parseSeqRange(first.header.get(SEQ_HEADER), first.seq).first;
        }
      }
      const log = new JetStreamEventLog<S>(
        where,
        nc,
        options.connection === undefined,
        js,
        jsm,
        names,
        record.seqOffset,
        record,
        nc.info?.max_payload ?? 1024 * 1024,
        options,
        { streamSeq: lastStreamSeq, seq: lastSeq },
      );
      log.firstHeld = firstHeld;
      if (options.projection) await log.foldCurrent();
      return log;
    } catch (error) {
      if (options.connection === undefined) await nc.close().catch(() => undefined);
      if (error instanceof EventLogError || error instanceof InvalidEventError) throw error;
      throw new EventLogError(`${text}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** The location, for messages. */
  get location(): string {
    return formatJetStreamLocation(this.where);
  }

  /**
   * The seq of the first event the stream held when opened (its limits may drop more since), or
   * undefined for an empty log.
   */
  get firstSeq(): number | undefined {
    if (this.nextSeq - 1 <= this.seqOffset) return undefined;
    return this.firstHeld ?? this.seqOffset + 1;
  }

  /** The NATS connection the log uses (a lease beside it shares it). */
  get connection(): NatsConnection {
    return this.nc;
  }

  /** The stream sequence of the last message this handle knows. */
  get streamSeq(): number {
    return this.publisher.streamSeq;
  }

  /** The error that failed the log (a fenced append, a lost connection), if any. */
  get failed(): Error | undefined {
    return this.publisher.failure;
  }

  /** Appends one decision's events as one message (see the class comment). */
  append(input: NewEvent | readonly NewEvent[], cause: string | null = null): AppendResult {
    const { events, at, ms } = this.stamp(input, cause);
    const texts = events.map(encodeEvent);
    this.checkSize(texts, events[0]?.seq);
    for (const event of events) this.fold(event);
    const sent: Promise<void>[] = [];
    // An archive's record has a subject of its own: the newest is one request away.
    const subject =
      events.length === 1 && events[0]?.type === 'LogSegmentArchived'
        ? this.names.archivedSubject
        : this.names.eventsSubject;
    if (events.length > 0) sent.push(this.send(subject, events, texts));
    const snapshot = this.snapshotIfDue(at, ms);
    if (snapshot) {
      events.push(snapshot.event);
      sent.push(this.send(this.names.snapshotsSubject, [snapshot.event], [snapshot.text]));
    }
    return this.track(events, sent);
  }

  /**
   * Appends events stamped elsewhere (an import), keeping their exact text, one message per run of
   * events with one cause (as they were appended), split where a run exceeds the message limit.
   */
  appendStored(stored: readonly StoredEvent[]): AppendResult {
    this.assertWritable();
    stored.forEach(({ event }, i) => {
      const expected = this.nextSeq + i;
      if (event.seq !== expected) {
        throw new InvalidEventError(
          { seq: event.seq },
          'seq',
          `does not continue the log: expected ${expected} (the stream was created for seq ${this.seqOffset + 1} on)`,
        );
      }
    });
    const sent: Promise<void>[] = [];
    let run: StoredEvent[] = [];
    let bytes = 0;
    const flush = () => {
      if (run.length === 0) return;
      sent.push(
        this.send(
          this.names.eventsSubject,
          run.map((s) => s.event),
          run.map((s) => s.text),
        ),
      );
      run = [];
      bytes = 0;
    };
    for (const item of stored) {
      this.fold(item.event);
      if (item.event.type === 'Snapshot') {
        flush();
        sent.push(this.send(this.names.snapshotsSubject, [item.event], [item.text]));
        continue;
      }
      const size = Buffer.byteLength(item.text) + 1;
      const last = run[run.length - 1];
      if (last && (last.event.cause !== item.event.cause || item.event.cause === null)) flush();
      if (bytes + size > this.messageLimit()) flush();
      this.checkSize([item.text], item.event.seq);
      run.push(item);
      bytes += size;
    }
    flush();
    return this.track(
      stored.map((s) => s.event),
      sent,
    );
  }

  /** Events with `fromSeq <= seq <= toSeq`, validated, in order (every snapshot read). */
  async *read(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): AsyncGenerator<ClusterEvent> {
    for await (const stored of this.readStored(fromSeq, toSeq)) yield stored.event;
  }

  /** Events with their exact stored text, validated, in order, up to the stream's end now. */
  async *readStored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): AsyncGenerator<StoredEvent> {
    const info = await this.jsm.streams.info(this.where.stream);
    const end = info.state.last_seq;
    if (info.state.messages === 0) return;
    const start = await this.reader.streamSeqOf(fromSeq, info.state.first_seq, end);
    const order = new SeqOrder();
    for await (const stored of this.reader.messages(start, end)) {
      if (stored.event.seq < fromSeq) continue;
      if (stored.event.seq > toSeq) return;
      order.accept(stored.event);
      yield stored;
    }
  }

  /**
   * Yields every event from `fromSeq` on, then each new one as it is stored, until `signal` aborts
   * (or the log closes).
   */
  async *follow(fromSeq: number, signal?: AbortSignal): AsyncGenerator<ClusterEvent> {
    const info = await this.jsm.streams.info(this.where.stream);
    const start =
      info.state.messages === 0
        ? 1
        : await this.reader.streamSeqOf(fromSeq, info.state.first_seq, info.state.last_seq);
    const order = new SeqOrder();
    for await (const stored of this.reader.messages(start, undefined, signal)) {
      if (stored.event.seq < fromSeq) continue;
      order.accept(stored.event);
      yield stored.event;
    }
  }

  /**
   * Keeps this handle's state folded up to the stream's last message as it grows (a standby),
   * until `stopFollowing`. `onEvent` hears each event folded.
   */
  startFollowing(onEvent?: (event: ClusterEvent) => void): void {
    if (this.following) return;
    const abort = new AbortController();
    const done = (async () => {
      try {
        const from = this.publisher.streamSeq + 1;
        for await (const stored of this.reader.messages(from, undefined, abort.signal)) {
          this.take(stored);
          onEvent?.(stored.event);
        }
      } catch (error) {
        if (!abort.signal.aborted) this.publisher.fail(error as Error);
      }
    })();
    this.following = { stop: () => abort.abort(), done };
  }

  /** Stops following and folds whatever the stream holds beyond it: then the handle may append. */
  async stopFollowing(): Promise<void> {
    const following = this.following;
    this.following = undefined;
    if (following) {
      following.stop();
      await following.done;
    }
    if (this.publisher.failure) throw this.publisher.failure;
    await this.catchUp();
  }

  /** Folds every message stored after the last one this handle knows. */
  async catchUp(): Promise<void> {
    const info = await this.jsm.streams.info(this.where.stream);
    const end = info.state.last_seq;
    const known = this.publisher.streamSeq;
    if (end <= known) return;
    for await (const stored of this.reader.messages(known + 1, end)) this.take(stored);
  }

  /** The seq of the newest `Snapshot` at or before `seq` (default: the newest of all). */
  async snapshotAtOrBefore(seq = Number.MAX_SAFE_INTEGER): Promise<number | undefined> {
    return this.reader.snapshotAtOrBefore(seq);
  }

  /**
   * Which log this is: the origin the stream's description records, else (a stream created
   * before origins were recorded) its first event while the stream still holds it, which a
   * writer then records.
   */
  async origin(): Promise<LogOrigin | undefined> {
    if (this.record.origin) return this.record.origin;
    const info = await this.jsm.streams.info(this.where.stream);
    const fromDescription = readStreamRecord(this.where.stream, info.config.description);
    if (fromDescription.origin) {
      this.record = fromDescription;
      return fromDescription.origin;
    }
    if (info.state.messages === 0) return undefined;
    const message = await this.jsm.streams.getMessage(this.where.stream, {
      seq: info.state.first_seq,
    });
    if (!message) return undefined;
    const range = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
    // The stream no longer holds its first event: its origin cannot be told any more.
    if (range.first !== this.seqOffset + 1) return undefined;
    const [text = ''] = message.string().split('\n', 1);
    const first = decodeEvent(text, { seq: range.first });
    const origin: LogOrigin = {
      // A writer records it with an ID of its own; a reader only derives it.
      id: this.options.readOnly ? null : nuid.next(),
      seq: first.seq,
      at: first.at,
      routerId: first.type === 'RouterStarted' ? first.routerId : null,
      stream: this.where.stream,
    };
    this.record = { ...fromDescription, origin };
    if (!this.options.readOnly) {
      await this.jsm.streams.update(this.where.stream, {
        ...info.config,
        description: describeStream(this.record),
      });
    }
    return origin;
  }

  /** The bytes the stream holds. */
  async liveBytes(): Promise<number> {
    return (await this.jsm.streams.info(this.where.stream)).state.bytes;
  }

  /** The seqs of the snapshots with `fromSeq <= seq <= toSeq`. */
  async snapshotsBetween(fromSeq: number, toSeq: number): Promise<number[]> {
    return this.reader.snapshotSeqs(fromSeq, toSeq);
  }

  /** The last seq the newest `LogSegmentArchived` covers (on its own subject). */
  async archivedThrough(): Promise<number | undefined> {
    const message = await this.jsm.streams
      .getMessage(this.where.stream, { last_by_subj: this.names.archivedSubject })
      .catch(() => null);
    if (!message) return undefined;
    const range = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
    const event = decodeEvent(message.string(), { seq: range.first });
    return event.type === 'LogSegmentArchived' ? event.toSeq : undefined;
  }

  /** Nothing to do: the stream's own limits (`applyLimits`) drop what is archived. */
  async dropThrough(): Promise<void> {
    this.assertWritable();
    return Promise.resolve();
  }

  /**
   * Sets the stream's limits (and those of its large snapshots' bucket, an hour longer), and
   * makes sure the stream takes `LogSegmentArchived` on its own subject (a stream created before
   * archiving took two subjects).
   */
  async applyLimits(limits: StreamLimits): Promise<void> {
    this.assertWritable();
    const info = await this.jsm.streams.info(this.where.stream);
    const subjects = [...new Set([...info.config.subjects, this.names.archivedSubject])];
    const maxAge = limits.maxAgeMs * 1_000_000;
    const maxBytes = limits.maxBytes > 0 ? limits.maxBytes : -1;
    await this.jsm.streams.update(this.where.stream, {
      ...info.config,
      subjects,
      max_age: maxAge,
      max_bytes: maxBytes,
    });
    const bucket = `OBJ_${this.names.snapshotBucket}`;
    const objects = await this.jsm.streams.info(bucket).catch(() => undefined);
    if (objects) {
      await this.jsm.streams.update(bucket, {
        ...objects.config,
        max_age: limits.maxAgeMs > 0 ? (limits.maxAgeMs + OBJECT_AGE_MARGIN_MS) * 1_000_000 : 0,
      });
    }
  }

  /** Resolves when every append so far is acknowledged (stored on a quorum of replicas). */
  async flushed(): Promise<void> {
    await this.pending;
  }

  /** Waits for appends in flight, stops following and closes the log's own connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.markClosed();
    this.following?.stop();
    await this.following?.done;
    await this.pending;
    if (this.ownsConnection) await this.nc.close().catch(() => undefined);
  }

  /** A standby still following, or a writer that failed (fenced: its own error), refuses. */
  protected writeRefusal(): Error | undefined {
    if (this.following) return new EventLogError(`event log ${this.location} is being followed`);
    const failure = this.publisher.failure;
    if (!failure) return undefined;
    return failure instanceof LogFencedError ? failure : this.failedEarlier(failure);
  }

  /** Folds an event read from the stream, which must continue the fold. */
  private take(stored: StreamEvent): void {
    if (stored.event.seq !== this.nextSeq) {
      throw new InvalidEventError(
        { seq: stored.event.seq },
        'seq',
        `gap: expected ${this.nextSeq}`,
      );
    }
    this.fold(stored.event);
    this.publisher.followed(stored.streamSeq);
  }

  private messageLimit(): number {
    return Math.max(1024, this.maxPayload - HEADROOM);
  }

  private checkSize(texts: readonly string[], seq: number | undefined): void {
    const bytes = texts.reduce((sum, text) => sum + Buffer.byteLength(text) + 1, 0);
    if (bytes > this.messageLimit()) {
      throw new EventLogError(
        `event log ${this.location}: seq ${seq}: one append of ${bytes} bytes exceeds the server's message limit (${this.maxPayload} bytes, max_payload)`,
      );
    }
  }

  /** Queues one message for the publisher; resolves on its acknowledgement. */
  private send(
    subject: string,
    events: readonly ClusterEvent[],
    texts: readonly string[],
  ): Promise<void> {
    const first = events[0]?.seq ?? 0;
    const last = events[events.length - 1]?.seq ?? first;
    const body = texts.join('\n');
    const large =
      subject === this.names.snapshotsSubject &&
      Buffer.byteLength(body) > (this.options.inlineSnapshotLimit ?? this.messageLimit());
    return this.publisher.send({
      subject,
      range: formatSeqRange(first, last),
      body: large ? '' : body,
      ...(large ? { objectText: body } : {}),
    });
  }

  private track(events: readonly ClusterEvent[], sent: readonly Promise<void>[]): AppendResult {
    const committed = Promise.all(sent).then(
      () => undefined,
      (error: Error) => {
        throw error instanceof EventLogError
          ? error
          : new EventLogError(`event log ${this.location} failed to commit: ${error.message}`);
      },
    );
    committed.catch(() => undefined);
    this.pending = this.pending.then(() => committed.catch(() => undefined));
    return { events, committed, durable: committed };
  }

  private async objectStore(): Promise<ObjectStore> {
    const objm = new Objm(this.nc);
    this.objects ??= this.options.readOnly
      ? await objm.open(this.names.snapshotBucket)
      : await objm.create(this.names.snapshotBucket, { replicas: this.options.replicas ?? 3 });
    return this.objects;
  }

  /** Folds the stream from its newest snapshot (or its start) to its last message now. */
  private async foldCurrent(): Promise<void> {
    const snapshot = await this.reader.lastSnapshotMessage();
    const end = this.publisher.streamSeq;
    if (end === 0) {
      this.resetFold(this.nextSeq);
      return;
    }
    const info = await this.jsm.streams.info(this.where.stream);
    const start = snapshot?.seq ?? info.state.first_seq;
    if (!snapshot) {
      // Without a snapshot the fold must start at the log's first event: a stream whose limits
      // dropped its start (and never held a snapshot) cannot be folded.
      const first = await this.jsm.streams.getMessage(this.where.stream, { seq: start });
      const range = first && parseSeqRange(first.header.get(SEQ_HEADER), first.seq);
      if (range && range.first !== this.seqOffset + 1) {
        throw new EventLogError(
          `${this.location}: the stream starts at seq ${range.first} and holds no snapshot, so its state cannot be folded (its limits dropped the start of the log): restore it from its archive`,
        );
      }
    }
    // Folding takes what is there now; the next seq follows the events folded.
    this.resetFold(
      snapshot
        ? parseSeqRange(snapshot.header.get(SEQ_HEADER), snapshot.seq).first
        : this.seqOffset + 1,
    );
    for await (const stored of this.reader.messages(start, end)) this.take(stored);
  }
}
