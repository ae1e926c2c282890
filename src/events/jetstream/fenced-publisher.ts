/**
 * The JetStream log's writer side: its fence. Every message is published with the stream
 * sequence it expects to follow (`Nats-Expected-Last-Sequence`), pipelined (each expects the one
 * before it, so a burst costs one round trip). A refused expectation either means a predecessor
 * was lost in flight (a node went away: recover and send again) or that another writer appended
 * meanwhile: then the publisher fails, fenced (`LogFencedError`), and so does every later message.
 */
import { headers } from '@nats-io/transport-node';
import {
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type PubAck,
} from '@nats-io/jetstream';
import type { ObjectStore } from '@nats-io/obj';
import { EventLogError } from '../errors.js';
import { OBJECT_HEADER, SEQ_HEADER } from './stream-format.js';

/** The log was written by another writer after this one's last message: it lost leadership. */
export class LogFencedError extends EventLogError {
  override readonly name = 'LogFencedError';
}

/** JetStream's error code for a failed `Nats-Expected-Last-Sequence` check. */
const WRONG_LAST_SEQUENCE = 10071;
/** How long a writer retries through transient trouble (a lost node, an election). */
const RECOVERY_MS = 30_000;

function isFencing(error: Error): boolean {
  return (
    (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) ||
    /wrong last sequence/i.test(error.message)
  );
}

/** One message to publish. */
export interface Outgoing {
  readonly subject: string;
  /** The `Readie-Seq` header: the seqs it holds. */
  readonly range: string;
  readonly body: string;
  /** A snapshot's text to store in the object store first (the body is then empty). */
  readonly objectText?: string;
}

/** A message queued, with what its sender waits on. */
interface Queued extends Outgoing {
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** A message sent and not yet acknowledged. */
interface Sent {
  readonly message: Queued;
  readonly headers: ReturnType<typeof headers>;
  readonly streamSeq: number;
}

/** What the publisher writes to. */
export interface PublisherTarget {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  /** The log's location, for messages. */
  readonly location: string;
  /** The object store for large snapshots (opened when first asked). */
  readonly objects: () => Promise<ObjectStore>;
}

/** One writer's fenced, pipelined publishing to one stream. */
export class FencedPublisher {
  private readonly writerId: string;
  /** The stream sequence of the last message known stored (acknowledged, or read). */
  private lastStreamSeq: number;
  /** The stream sequence the last message sent expects to take. */
  private sentStreamSeq: number;
  private problem: Error | undefined;
  private pumping = false;
  private recovering = false;
  private outstanding = 0;
  private settled: (() => void) | undefined;
  private readonly unacked = new Map<number, Sent>();
  private readonly queue: Queued[] = [];

  constructor(
    private readonly target: PublisherTarget,
    writerId: string,
    lastStreamSeq: number,
  ) {
    this.writerId = writerId;
    this.lastStreamSeq = lastStreamSeq;
    this.sentStreamSeq = lastStreamSeq;
  }

  /** The stream sequence of the last message this writer knows stored. */
  get streamSeq(): number {
    return this.lastStreamSeq;
  }

  /** The error that failed the writer (a lost fence, trouble that outlasted recovery), if any. */
  get failure(): Error | undefined {
    return this.problem;
  }

  /** The stream grew by a message this handle read rather than sent (a standby following it). */
  followed(streamSeq: number): void {
    this.lastStreamSeq = streamSeq;
    this.sentStreamSeq = streamSeq;
  }

  /** Queues one message; resolves on its acknowledgement. */
  send(message: Outgoing): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ...message, resolve, reject });
      void this.pump();
    });
  }

  /** Fails the writer (the first failure stands); a fencing refusal becomes `LogFencedError`. */
  fail(error: Error): void {
    if (this.problem) return;
    this.problem = isFencing(error)
      ? new LogFencedError(
          `event log ${this.target.location}: another writer appended after this one's last message (${error.message}): this writer lost the log`,
        )
      : error;
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
            const objects = await this.target.objects();
            await objects.putBlob({ name }, new TextEncoder().encode(message.objectText));
          } catch (error) {
            this.fail(error as Error);
          }
          h.set(OBJECT_HEADER, name);
        }
        if (this.problem) {
          message.reject(this.problem);
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
    this.publishOnce(sent)
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

  /** Publishes one message expecting its predecessor, under an ID that names this writer. */
  private publishOnce(sent: Sent): Promise<PubAck> {
    return this.target.js.publish(sent.message.subject, sent.message.body, {
      headers: sent.headers,
      expect: { lastSequence: sent.streamSeq - 1 },
      msgID: `${this.writerId}-${sent.streamSeq}`,
    });
  }

  private acked(sent: Sent, streamSeq: number): void {
    this.lastStreamSeq = Math.max(this.lastStreamSeq, streamSeq);
    if (this.unacked.delete(sent.streamSeq)) sent.message.resolve();
  }

  /**
   * After a failed publish: waits for every publish in flight, asks the stream for its last
   * message, and sends again, in order, every message of this writer's that the stream lacks. A
   * last message of another writer's means this one was overtaken: the writer fails, fenced.
   * Transient trouble (a lost node, a leader election) is retried for `RECOVERY_MS`.
   */
  private recover(cause: Error): void {
    if (this.recovering || this.problem) {
      if (this.problem) this.rejectUnacked();
      return;
    }
    this.recovering = true;
    void (async () => {
      const { jsm, stream } = this.target;
      const deadline = Date.now() + RECOVERY_MS;
      let problem = cause;
      while (Date.now() < deadline && !this.problem) {
        if (this.outstanding > 0) await new Promise<void>((resolve) => (this.settled = resolve));
        this.settled = undefined;
        try {
          const info = await jsm.streams.info(stream);
          const lastSeq = info.state.last_seq;
          if (lastSeq > 0 && lastSeq !== this.lastStreamSeq) {
            const last = await jsm.streams.getMessage(stream, { seq: lastSeq });
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
            this.acked(sent, (await this.publishOnce(sent)).seq);
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
        item.reject(this.problem ?? problem);
      }
    })();
  }

  private rejectUnacked(): void {
    for (const sent of this.unacked.values()) sent.message.reject(this.problem as Error);
    this.unacked.clear();
  }
}
