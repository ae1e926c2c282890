/**
 * The JetStream log's reading side: messages of the stream decoded back into events (a large
 * snapshot fetched from the object store), the message that holds a given seq, and the walk over
 * `Snapshot` messages. The layout it reads is `stream-format.ts`'s.
 */
import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type StoredMsg,
} from '@nats-io/jetstream';
import type { ObjectStore } from '@nats-io/obj';
import { decodeEvent } from '../decode.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { StoredEvent } from '../types.js';
import {
  formatSeqRange,
  OBJECT_HEADER,
  parseSeqRange,
  SEQ_HEADER,
  type StreamNames,
} from './stream-format.js';

/** An event as read, with the stream message that holds it. */
export type StreamEvent = StoredEvent & { readonly streamSeq: number };

/** What the reader reads from. */
export interface ReaderSource {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly names: StreamNames;
  /** The log's location, for messages. */
  readonly location: string;
  /** The object store for large snapshots (opened when first asked). */
  readonly objects: () => Promise<ObjectStore>;
  /** Whether the log is closing: a read in progress then ends. */
  readonly closed: () => boolean;
}

/** Reads one stream's messages as events. */
export class StreamReader {
  constructor(private readonly source: ReaderSource) {}

  private get stream(): string {
    return this.source.names.stream;
  }

  /** Messages from stream sequence `start` to `end` (or on, until `signal`), decoded. */
  async *messages(
    start: number,
    end: number | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<StreamEvent> {
    if ((end !== undefined && start > end) || signal?.aborted) return;
    const consumer = await this.source.js.consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, start),
    });
    const messages = await consumer.consume({ max_messages: 512 });
    const stop = () => messages.stop();
    signal?.addEventListener('abort', stop, { once: true });
    // Aborted while the consumer was being made (a standby that won the lease at once): no
    // abort event comes any more, and an idle stream would keep the loop below waiting.
    if (signal?.aborted) stop();
    // Each stream message once, from `start` on: an ordered consumer that the client library
    // recreates (after missed heartbeats, say, on a loaded host) must not hand the fold a
    // message again, nor one before where the read began.
    let after = Math.max(1, start) - 1;
    try {
      for await (const message of messages) {
        if (message.seq <= after) continue;
        after = message.seq;
        const range = parseSeqRange(message.headers?.get(SEQ_HEADER), message.seq);
        const object = message.headers?.get(OBJECT_HEADER) ?? '';
        const body = object === '' ? message.string() : await this.readObject(object, message.seq);
        const texts = body.split('\n');
        if (texts.length !== range.last - range.first + 1) {
          throw new EventLogError(
            `${this.source.location}: stream message ${message.seq} says seq ${formatSeqRange(range.first, range.last)} but holds ${texts.length} events`,
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
        if (this.source.closed()) return;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      messages.stop();
    }
  }

  /** The stream sequence of the message holding event `seq` (binary search on the headers). */
  async streamSeqOf(seq: number, low: number, high: number): Promise<number> {
    let lo = low;
    let hi = high;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const message = await this.source.jsm.streams.getMessage(this.stream, { seq: mid });
      if (!message) {
        throw new EventLogError(`${this.source.location}: stream message ${mid} is missing`);
      }
      const { last } = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
      if (last < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The seqs of the `Snapshot` events with `fromSeq <= seq <= toSeq` (their headers alone). */
  async snapshotSeqs(fromSeq: number, toSeq: number): Promise<number[]> {
    const last = await this.lastSnapshotMessage();
    if (!last || toSeq < fromSeq) return [];
    const info = await this.source.jsm.streams.info(this.stream);
    if (info.state.messages === 0) return [];
    const start = await this.streamSeqOf(fromSeq, info.state.first_seq, info.state.last_seq);
    if (start > last.seq) return [];
    const consumer = await this.source.js.consumers.get(this.stream, {
      filter_subjects: this.source.names.snapshotsSubject,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: start,
      headers_only: true,
    });
    const seqs: number[] = [];
    const messages = await consumer.consume({ max_messages: 256 });
    try {
      for await (const message of messages) {
        const { first } = parseSeqRange(message.headers?.get(SEQ_HEADER), message.seq);
        if (first > toSeq) break;
        if (first >= fromSeq) seqs.push(first);
        // The newest snapshot when this began is the last one to wait for.
        if (message.seq >= last.seq) break;
      }
    } finally {
      messages.stop();
    }
    return seqs;
  }

  /** The newest `Snapshot` message, if any. */
  async lastSnapshotMessage(): Promise<StoredMsg | undefined> {
    const message = await this.source.jsm.streams
      .getMessage(this.stream, { last_by_subj: this.source.names.snapshotsSubject })
      .catch(() => null);
    return message ?? undefined;
  }

  /** The seq of the newest `Snapshot` at or before `seq`. */
  async snapshotAtOrBefore(seq: number): Promise<number | undefined> {
    let message = await this.lastSnapshotMessage();
    // Snapshots are rare: walk back from the newest one by one.
    while (message) {
      const { first } = parseSeqRange(message.header.get(SEQ_HEADER), message.seq);
      if (first <= seq) return first;
      message = await this.snapshotBefore(message.seq);
    }
    return undefined;
  }

  private async snapshotBefore(streamSeq: number): Promise<StoredMsg | undefined> {
    // Walk back message by message to the previous snapshot subject's message.
    for (let seq = streamSeq - 1; seq >= 1; seq -= 1) {
      const message = await this.source.jsm.streams
        .getMessage(this.stream, { seq })
        .catch(() => null);
      if (message?.subject === this.source.names.snapshotsSubject) return message;
    }
    return undefined;
  }

  private async readObject(name: string, streamSeq: number): Promise<string> {
    const objects = await this.source.objects();
    const data = await objects.getBlob(name);
    if (!data) {
      throw new EventLogError(
        `${this.source.location}: stream message ${streamSeq} keeps its snapshot in object ${name} of bucket ${this.source.names.snapshotBucket}, which is missing`,
      );
    }
    return new TextDecoder().decode(data);
  }
}
