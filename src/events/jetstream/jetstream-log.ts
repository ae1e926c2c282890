/**
 * The event log on a NATS JetStream stream (replicated, e.g. R3 on a three-node cluster); the
 * layout is in `stream-format.ts`.
 *
 * One writer, fenced: every message is published with the stream sequence it expects to follow
 * (`Nats-Expected-Last-Sequence`). A writer knows the last message because it folded it, so the
 * seqs it stamps continue the log's; another writer that appended meanwhile makes the server
 * refuse the message, and with it every later one this writer had in flight. The log then fails
 * (`LogFencedError`): its folded state is ahead of the stream, and the router that holds it steps
 * down. Appends are pipelined (each expects the one before it), so a burst costs one round trip.
 *
 * `committed` and `durable` resolve together, on the stream's acknowledgement: JetStream answers
 * once a quorum of the stream's replicas stored the message.
 */
import { connect, headers, nuid, type NatsConnection } from '@nats-io/transport-node';
import {
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type StoredMsg,
} from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { decodeEvent, encodeEvent, isoInstant, SeqOrder } from '../decode.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { AppendResult, EventLogBackend } from '../event-log.js';
import type { LogProjection } from '../projection.js';
import { snapshotDue, snapshotEvent, stampEvents } from '../stamp.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';
import { upcaster } from '../upcast.js';
import { waitForCluster, type ClusterWaitReport } from './cluster-wait.js';
import { formatJetStreamLocation, type JetStreamLocation } from './location.js';
import {
  describeStream,
  formatSeqRange,
  OBJECT_HEADER,
  parseSeqRange,
  readStreamRecord,
  SEQ_HEADER,
  STREAM_SCHEMA_VERSION,
  streamNames,
  type StreamNames,
} from './stream-format.js';

/** How to open a JetStream log. */
export interface JetStreamLogOptions<S> {
  /** Open for reading only. Default false. */
  readonly readOnly?: boolean;
  /**
   * The clock that stamps `at`, in epoch milliseconds, and that `open`'s wait counts by. Default
   * `Date.now`.
   */
  readonly clock?: () => number;
  /** A fold to keep beside the log; needed for `state` and for snapshots. */
  readonly projection?: LogProjection<S>;
  /** Append a `Snapshot` after this many events since the last one; 0 never. Default 10,000. */
  readonly snapshotEvery?: number;
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

/** The log was written by another writer after this one's last message: it lost leadership. */
export class LogFencedError extends EventLogError {
  override readonly name = 'LogFencedError';
}

/** JetStream's error code for a failed `Nats-Expected-Last-Sequence` check. */
const WRONG_LAST_SEQUENCE = 10071;
/** How long `open` waits by default for a cluster that is still starting. */
const OPEN_WAIT_MS = 30_000;
/** How long a writer retries through transient trouble (a lost node, an election). */
const RECOVERY_MS = 30_000;

function isFencing(error: Error): boolean {
  return (
    (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) ||
    /wrong last sequence/i.test(error.message)
  );
}

/** A message sent and not yet acknowledged. */
interface Sent {
  readonly message: Outgoing;
  readonly headers: ReturnType<typeof headers>;
  readonly streamSeq: number;
}
const HEADROOM = 64 * 1024;

interface Outgoing {
  readonly subject: string;
  readonly range: string;
  readonly body: string;
  /** A snapshot's text to store in the object store first. */
  readonly objectText?: string;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** The event log on one JetStream stream. */
export class JetStreamEventLog<S = never> implements EventLogBackend<S> {
  /** Which store holds it. */
  readonly kind = 'jetstream' as const;
  private nextSeq: number;
  private lastStreamSeq: number;
  private sentStreamSeq: number;
  private lastSnapshot: number | undefined;
  private working: S | undefined;
  private failure: Error | undefined;
  private closed = false;
  private pumping = false;
  private recovering = false;
  private outstanding = 0;
  private settled: (() => void) | undefined;
  private readonly unacked = new Map<number, Sent>();
  private readonly queue: Outgoing[] = [];
  private pending: Promise<void> = Promise.resolve();
  private objects: ObjectStore | undefined;
  private following: { stop: () => void; done: Promise<void> } | undefined;
  private readonly writerId = nuid.next();

  private constructor(
    readonly where: JetStreamLocation,
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: StreamNames,
    private readonly seqOffset: number,
    private readonly maxPayload: number,
    private readonly options: JetStreamLogOptions<S>,
    last: { streamSeq: number; seq: number },
  ) {
    this.lastStreamSeq = last.streamSeq;
    this.sentStreamSeq = last.streamSeq;
    this.nextSeq = last.seq + 1;
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
          subjects: [names.eventsSubject, names.snapshotsSubject],
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
      if (info.state.messages > 0) {
        const last = await jsm.streams.getMessage(where.stream, { seq: lastStreamSeq });
        if (!last) throw new EventLogError(`${text}: cannot read its last message`);
        lastSeq = parseSeqRange(last.header.get(SEQ_HEADER), last.seq).last;
      }
      const log = new JetStreamEventLog<S>(
        where,
        nc,
        options.connection === undefined,
        js,
        jsm,
        names,
        record.seqOffset,
        nc.info?.max_payload ?? 1024 * 1024,
        options,
        { streamSeq: lastStreamSeq, seq: lastSeq },
      );
      if (options.projection) await log.foldCurrent(options.projection);
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

  /** The seq of the first event, or undefined for an empty log. */
  get firstSeq(): number | undefined {
    return this.nextSeq - 1 > this.seqOffset ? this.seqOffset + 1 : undefined;
  }

  /** The seq of the last event appended, read at open or followed. */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /** The NATS connection the log uses (a lease beside it shares it). */
  get connection(): NatsConnection {
    return this.nc;
  }

  /** The stream sequence of the last message this handle knows. */
  get streamSeq(): number {
    return this.lastStreamSeq;
  }

  /** The folded state after `lastSeq`. Needs a projection. */
  get state(): S {
    if (!this.options.projection)
      throw new EventLogError('this log was opened without a projection');
    return this.working as S;
  }

  /** The error that failed the log (a fenced append, a lost connection), if any. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** Appends one decision's events as one message (see the class comment). */
  append(input: NewEvent | readonly NewEvent[], cause: string | null = null): AppendResult {
    this.assertWritable();
    const list: readonly NewEvent[] = Array.isArray(input) ? input : [input as NewEvent];
    const at = isoInstant((this.options.clock ?? Date.now)());
    const events = stampEvents(list, this.nextSeq, at, cause);
    const texts = events.map(encodeEvent);
    this.checkSize(texts, events[0]?.seq);
    for (const event of events) this.fold(event);
    const sent: Promise<void>[] = [];
    if (events.length > 0) sent.push(this.send(this.names.eventsSubject, events, texts));
    const snapshot = this.snapshotIfDue(at);
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

  /** Events with `fromSeq <= seq <= toSeq`, validated, in order. */
  async *read(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): AsyncGenerator<ClusterEvent> {
    for await (const stored of this.readStored(fromSeq, toSeq)) yield stored.event;
  }

  /** Events with their exact stored text, validated, in order, up to the stream's end now. */
  async *readStored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): AsyncGenerator<StoredEvent> {
    const info = await this.jsm.streams.info(this.where.stream);
    const end = info.state.last_seq;
    if (info.state.messages === 0) return;
    const start = await this.streamSeqOf(fromSeq, info.state.first_seq, end);
    const order = new SeqOrder();
    for await (const stored of this.messages(start, end)) {
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
        : await this.streamSeqOf(fromSeq, info.state.first_seq, info.state.last_seq);
    const order = new SeqOrder();
    for await (const stored of this.messages(start, undefined, signal)) {
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
        for await (const stored of this.messages(this.lastStreamSeq + 1, undefined, abort.signal)) {
          this.take(stored);
          onEvent?.(stored.event);
        }
      } catch (error) {
        if (!abort.signal.aborted) this.failure ??= error as Error;
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
    if (this.failure) throw this.failure;
    await this.catchUp();
  }

  /** Folds every message stored after the last one this handle knows. */
  async catchUp(): Promise<void> {
    const info = await this.jsm.streams.info(this.where.stream);
    const end = info.state.last_seq;
    if (end <= this.lastStreamSeq) return;
    for await (const stored of this.messages(this.lastStreamSeq + 1, end)) this.take(stored);
  }

  /** The seq of the newest `Snapshot` at or before `seq` (default: the newest of all). */
  async snapshotAtOrBefore(seq = Number.MAX_SAFE_INTEGER): Promise<number | undefined> {
    let message = await this.lastSnapshotMessage();
    // Snapshots are rare: walk back from the newest one by one.
    while (message) {
      const { first } = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
      if (first <= seq) return first;
      message = await this.snapshotBefore(message.seq);
    }
    return undefined;
  }

  /** Resolves when every append so far is acknowledged (stored on a quorum of replicas). */
  async flushed(): Promise<void> {
    await this.pending;
  }

  /** Waits for appends in flight, stops following and closes the log's own connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.following?.stop();
    await this.following?.done;
    await this.pending;
    if (this.ownsConnection) await this.nc.close().catch(() => undefined);
  }

  private assertWritable(): void {
    if (this.closed) throw new EventLogError(`event log ${this.location} is closed`);
    if (this.options.readOnly)
      throw new EventLogError(`event log ${this.location} is open read-only`);
    if (this.following) throw new EventLogError(`event log ${this.location} is being followed`);
    if (this.failure) {
      throw this.failure instanceof LogFencedError
        ? this.failure
        : new EventLogError(
            `event log ${this.location} failed to write earlier: ${this.failure.message}`,
          );
    }
  }

  private fold(event: ClusterEvent, own = false): void {
    this.nextSeq = event.seq + 1;
    if (event.type === 'Snapshot') this.lastSnapshot = event.seq;
    const { projection } = this.options;
    if (projection) {
      this.working = own
        ? projection.advance(this.working as S, event.seq)
        : projection.apply(this.working as S, event);
    }
  }

  private take(stored: { event: ClusterEvent; streamSeq: number }): void {
    if (stored.event.seq !== this.nextSeq) {
      throw new InvalidEventError(
        { seq: stored.event.seq },
        'seq',
        `gap: expected ${this.nextSeq}`,
      );
    }
    this.fold(stored.event);
    this.lastStreamSeq = stored.streamSeq;
    this.sentStreamSeq = stored.streamSeq;
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

  /** How many events the next snapshot waits at least: the last one's weight (`snapshotDue`). */
  private snapshotSpacing: number | undefined;

  private snapshotIfDue(at: string): StoredEvent | undefined {
    const { projection } = this.options;
    const every = this.options.snapshotEvery ?? 10_000;
    if (!projection) return undefined;
    this.snapshotSpacing ??= projection.weight?.(this.working as S) ?? 0;
    if (!snapshotDue(this.lastSeq, this.lastSnapshot, this.firstSeq, every, this.snapshotSpacing)) {
      return undefined;
    }
    this.snapshotSpacing = projection.weight?.(this.working as S) ?? 0;
    const event = snapshotEvent(this.nextSeq, at, projection.toSnapshot(this.working as S));
    this.fold(event, true);
    return { event, text: encodeEvent(event) };
  }

  /** Queues one message; resolves on its acknowledgement. */
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
    return new Promise<void>((resolve, reject) => {
      this.queue.push({
        subject,
        range: formatSeqRange(first, last),
        body: large ? '' : body,
        ...(large ? { objectText: body } : {}),
        resolve,
        reject,
      });
      void this.pump();
    });
  }

  /** Publishes the queue in order, each message expecting the one before it. */
  private async pump(): Promise<void> {
    if (this.pumping || this.recovering) return;
    this.pumping = true;
    try {
      for (let item = this.queue.shift(); item; item = this.queue.shift()) {
        const message = item;
        const h = headers();
        h.set(SEQ_HEADER, message.range);
        if (message.objectText !== undefined) {
          const name = `snapshot-${message.range}-${this.writerId}`;
          try {
            const objects = await this.objectStore();
            await objects.putBlob({ name }, new TextEncoder().encode(message.objectText));
          } catch (error) {
            this.fail(error as Error);
          }
          h.set(OBJECT_HEADER, name);
        }
        if (this.failure) {
          message.reject(this.failure);
          continue;
        }
        this.sentStreamSeq += 1;
        const sent = { message, headers: h, streamSeq: this.sentStreamSeq };
        this.unacked.set(sent.streamSeq, sent);
        this.publish(sent);
        if (this.recovering) break;
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Publishes one message expecting its predecessor; a failure other than fencing recovers. */
  private publish(sent: Sent): void {
    this.outstanding += 1;
    this.js
      .publish(sent.message.subject, sent.message.body, {
        headers: sent.headers,
        expect: { lastSequence: sent.streamSeq - 1 },
        msgID: `${this.writerId}-${sent.streamSeq}`,
      })
      .then(
        (ack) => this.acked(sent, ack.seq),
        (error: Error) => {
          // A refused expectation may only mean a predecessor was not stored (a node was lost
          // mid-flight): recovery asks the stream whose message is last before calling it fencing.
          this.recover(error);
        },
      )
      .finally(() => {
        this.outstanding -= 1;
        if (this.outstanding === 0) this.settled?.();
      });
  }

  private acked(sent: Sent, streamSeq: number): void {
    this.lastStreamSeq = Math.max(this.lastStreamSeq, streamSeq);
    if (this.unacked.delete(sent.streamSeq)) sent.message.resolve();
  }

  /**
   * After a failed publish: waits for every publish in flight, asks the stream for its last
   * message, and sends again, in order, every message of this writer's that the stream lacks. A
   * last message of another writer's means this one was overtaken: the log fails, fenced.
   * Transient trouble (a lost node, a leader election) is retried for `RECOVERY_MS`.
   */
  private recover(cause: Error): void {
    if (this.recovering || this.failure) {
      if (this.failure) this.rejectUnacked();
      return;
    }
    this.recovering = true;
    void (async () => {
      const deadline = Date.now() + RECOVERY_MS;
      let problem = cause;
      while (Date.now() < deadline && !this.failure) {
        if (this.outstanding > 0) await new Promise<void>((resolve) => (this.settled = resolve));
        this.settled = undefined;
        try {
          const info = await this.jsm.streams.info(this.where.stream);
          const lastSeq = info.state.last_seq;
          if (lastSeq > 0 && lastSeq !== this.lastStreamSeq) {
            const last = await this.jsm.streams.getMessage(this.where.stream, { seq: lastSeq });
            const id = last?.header.get('Nats-Msg-Id') ?? '';
            if (!id.startsWith(`${this.writerId}-`)) {
              this.fail(cause);
              break;
            }
          }
          for (const [streamSeq, sent] of [...this.unacked]) {
            if (streamSeq <= lastSeq) this.acked(sent, streamSeq);
          }
          // Send the rest again, one at a time, each expecting the one before.
          for (const sent of [...this.unacked.values()]) {
            const ack = await this.js.publish(sent.message.subject, sent.message.body, {
              headers: sent.headers,
              expect: { lastSequence: sent.streamSeq - 1 },
              msgID: `${this.writerId}-${sent.streamSeq}`,
            });
            this.acked(sent, ack.seq);
          }
          this.recovering = false;
          void this.pump();
          return;
        } catch (error) {
          problem = error as Error;
          if (isFencing(problem) && this.unacked.size > 0) {
            // Our predecessor is stored, so the refusal is another writer's doing.
            const first = [...this.unacked.keys()][0] ?? 0;
            if (first - 1 <= this.lastStreamSeq) {
              this.fail(problem);
              break;
            }
          }
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
      this.fail(problem);
      this.rejectUnacked();
      this.recovering = false;
      for (let item = this.queue.shift(); item; item = this.queue.shift()) {
        item.reject(this.failure ?? problem);
      }
    })();
  }

  private rejectUnacked(): void {
    for (const sent of this.unacked.values()) sent.message.reject(this.failure as Error);
    this.unacked.clear();
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = isFencing(error)
      ? new LogFencedError(
          `event log ${this.location}: another writer appended after this one's last message (${error.message}): this writer lost the log`,
        )
      : error;
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

  private async foldCurrent(projection: LogProjection<S>): Promise<void> {
    this.working = projection.initial();
    const snapshot = await this.lastSnapshotMessage();
    if (this.lastStreamSeq === 0) return;
    const info = await this.jsm.streams.info(this.where.stream);
    const start = snapshot?.seq ?? info.state.first_seq;
    // Folding takes what is there now; `nextSeq` follows the events folded.
    this.nextSeq = snapshot
      ? parseSeqRange(snapshot.header.get(SEQ_HEADER), snapshot.seq).first
      : this.seqOffset + 1;
    for await (const stored of this.messages(start, this.lastStreamSeq)) this.take(stored);
  }

  private async lastSnapshotMessage(): Promise<StoredMsg | undefined> {
    const message = await this.jsm.streams
      .getMessage(this.where.stream, { last_by_subj: this.names.snapshotsSubject })
      .catch(() => null);
    return message ?? undefined;
  }

  private async snapshotBefore(streamSeq: number): Promise<StoredMsg | undefined> {
    // Walk back message by message to the previous snapshot subject's message.
    for (let seq = streamSeq - 1; seq >= 1; seq -= 1) {
      const message = await this.jsm.streams
        .getMessage(this.where.stream, { seq })
        .catch(() => null);
      if (message?.subject === this.names.snapshotsSubject) return message;
    }
    return undefined;
  }

  /** The stream sequence of the message holding event `seq` (binary search on the headers). */
  private async streamSeqOf(seq: number, low: number, high: number): Promise<number> {
    let lo = low;
    let hi = high;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const message = await this.jsm.streams.getMessage(this.where.stream, { seq: mid });
      if (!message) throw new EventLogError(`${this.location}: stream message ${mid} is missing`);
      const { last } = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
      if (last < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Messages from stream sequence `start` to `end` (or on, until `signal`), decoded. */
  private async *messages(
    start: number,
    end: number | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<StoredEvent & { streamSeq: number }> {
    if (end !== undefined && start > end) return;
    const consumer = await this.js.consumers.get(this.where.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, start),
    });
    const messages = await consumer.consume({ max_messages: 512 });
    const stop = () => messages.stop();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const message of messages) {
        const range = parseSeqRange(message.headers?.get(SEQ_HEADER), message.seq);
        const object = message.headers?.get(OBJECT_HEADER) ?? '';
        const body = object === '' ? message.string() : await this.readObject(object, message.seq);
        const texts = body.split('\n');
        if (texts.length !== range.last - range.first + 1) {
          throw new EventLogError(
            `${this.location}: stream message ${message.seq} says seq ${formatSeqRange(range.first, range.last)} but holds ${texts.length} events`,
          );
        }
        for (const [i, text] of texts.entries()) {
          const event = decodeEvent(text, { seq: range.first + i });
          if (event.seq !== range.first + i) {
            throw new InvalidEventError(
              { seq: range.first + i },
              'seq',
              `stored in stream message ${message.seq} as seq ${range.first + i} but says ${event.seq}`,
            );
          }
          yield { event, text, streamSeq: message.seq };
        }
        if (end !== undefined && message.seq >= end) return;
        if (this.closed) return;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      messages.stop();
    }
  }

  private async readObject(name: string, streamSeq: number): Promise<string> {
    const objects = await this.objectStore();
    const data = await objects.getBlob(name);
    if (!data) {
      throw new EventLogError(
        `${this.location}: stream message ${streamSeq} keeps its snapshot in object ${name} of bucket ${this.names.snapshotBucket}, which is missing`,
      );
    }
    return new TextDecoder().decode(data);
  }
}
