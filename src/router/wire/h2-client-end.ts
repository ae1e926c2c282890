/**
 * The client's end of a `RequestExecution` call on the platform's HTTP/2: the stream's DATA split
 * into messages (only their first bytes read: a chunk stays the frame it arrived as), answers
 * written as frames (a worker's answer under the router's IDs is its own frame, unchanged), the
 * status in trailers. HTTP/2 flow control is the backpressure: a paused call reads nothing more,
 * so the client's window closes. The client's deadline (`grpc-timeout`) is enforced here, as a
 * gRPC server does, and so are the router's own bounds on what a client can make it hold: the time
 * to the first message (`FIRST_MESSAGE_TIMEOUT`), the time the client may send nothing before
 * ending its request (`STREAM_IDLE_TIMEOUT`) and the bytes of unfinished messages held (its
 * `StreamBudget`, given back when the stream ends).
 */
import { constants, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { status } from '@grpc/grpc-js';
import type { TrailerEntry } from '../../core/calls/answer-trailers.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { ClientAnswer } from '../../core/calls/relay-messages.js';
import type { ClientEnd, ClientEndEvents } from '../calls/call-ends.js';
import { clientAnswerParts, decodeClientMessage } from '../calls/relay-codec.js';
import { formatDuration } from '../../shared/units.js';
import { StreamLimitError, type StreamBudget } from './call-stream-limits.js';
import { FrameError, FrameReader, framedParts, type GrpcFrame } from './grpc-frames.js';
import { RESPONSE_HEADERS, statusTrailers } from './grpc-headers.js';
import { keepFrame, keptFrame } from './kept-frames.js';

/** The largest message a client may send (gRPC's default, as grpc-js enforced it). */
export const MAX_CLIENT_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * The largest first message (the call's config: IDs, hints, package entries): far above any
 * real config, far below what a stream may otherwise hold before it is placed.
 */
export const MAX_CONFIG_MESSAGE_BYTES = 1024 * 1024;

function configTooLarge(length: number, max: number): string {
  return `the call's first message (its config) is ${length} bytes: at most ${max} are accepted`;
}

/** The router's bounds on one call stream, in ms (0: none). */
export interface ClientEndBounds {
  /** What the stream may hold of unfinished messages (and its slot among open streams). */
  readonly budget?: StreamBudget;
  /** From the stream's opening to its first whole message. */
  readonly firstMessageMs: number;
  /** The longest the client may send nothing before it ends its request (unless held back). */
  readonly idleMs: number;
}

const NO_BOUNDS: ClientEndBounds = { firstMessageMs: 0, idleMs: 0 };

/** A `RequestExecution` stream served on `node:http2`. */
export class H2ClientEnd implements ClientEnd {
  private readonly reader = new FrameReader(MAX_CONFIG_MESSAGE_BYTES, configTooLarge);
  private events: ClientEndEvents | undefined;
  /** Frames read while the call was paused, to deliver in order on resume. */
  private readonly pending: GrpcFrame[] = [];
  /** Bytes of `pending`. */
  private pendingBytes = 0;
  private paused = false;
  private endPending = false;
  private responded = false;
  /** The status to send once the stream asks for its trailers. */
  private trailers: OutgoingHttpHeaders | undefined;
  /** True once a status is sent or the stream closed: nothing more is delivered or written. */
  private finished = false;
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** Runs until the first whole message arrived. */
  private firstMessageTimer: NodeJS.Timeout | undefined;
  /** Runs while the router waits on the client: refreshed by every byte it sends. */
  private idleTimer: NodeJS.Timeout | undefined;
  private firstArrived = false;
  /** The client ended its request (half-close). */
  private requestEnded = false;

  constructor(
    private readonly stream: ServerHttp2Stream,
    /** Epoch ms (Infinity: none). */
    readonly deadline: number,
    now: number,
    private readonly bounds: ClientEndBounds = NO_BOUNDS,
  ) {
    stream.on('error', () => undefined); // 'close' tells the outcome
    stream.on('wantTrailers', () => stream.sendTrailers(this.trailers ?? { 'grpc-status': '0' }));
    // The stream's slot is taken until the stream is gone, answered or not: a client that never
    // ends a stream the router answered still holds it.
    if (stream.destroyed) bounds.budget?.close();
    else stream.once('close', () => bounds.budget?.close());
    if (Number.isFinite(deadline)) {
      this.deadlineTimer = setTimeout(() => this.deadlinePassed(), Math.max(0, deadline - now));
    }
    if (bounds.firstMessageMs > 0) {
      this.firstMessageTimer = setTimeout(() => this.firstMessageLate(), bounds.firstMessageMs);
    }
  }

  listen(events: ClientEndEvents): void {
    this.events = events;
    const { stream } = this;
    stream.on('data', (piece: Buffer) => {
      if (this.finished) return;
      this.idleTimer?.refresh();
      try {
        this.reader.push(piece, (frame) => this.read(frame));
        this.bounds.budget?.hold(this.heldBytes());
      } catch (error) {
        this.refuseFrames(error);
        return;
      }
      this.deliver();
    });
    stream.on('end', () => {
      this.requestEnded = true;
      this.stopIdleTimer();
      this.endPending = true;
      this.deliver();
    });
    stream.on('close', () => {
      if (this.finished) return;
      this.finish();
      events.gone();
    });
  }

  pause(): void {
    this.paused = true;
    // Held back by the router, the client cannot send: that is not its idleness.
    this.stopIdleTimer();
    this.stream.pause();
  }

  resume(): void {
    this.paused = false;
    this.deliver();
    if (!this.paused) {
      this.startIdleTimer();
      this.stream.resume();
    }
  }

  write(answer: ClientAnswer, drained: () => void): boolean {
    if (this.finished) return true;
    this.respond();
    const parts = clientAnswerParts(answer);
    const kept = parts.length === 1 ? keptFrame(parts[0]!) : undefined;
    let fits = true;
    if (kept) fits = this.stream.write(kept);
    else for (const piece of framedParts(parts)) fits = this.stream.write(piece);
    if (fits) return true;
    this.stream.once('drain', drained);
    return false;
  }

  end(trailers: readonly TrailerEntry[]): void {
    this.sendStatus(status.OK, '', trailers);
  }

  fail(code: GrpcCodeName, details: string, trailers: readonly TrailerEntry[]): void {
    this.sendStatus(status[code], details, trailers);
  }

  /** Delivers the frames read (and then the half-close) unless paused. */
  private deliver(): void {
    const events = this.events;
    if (!events) return;
    while (!this.paused && !this.finished) {
      const frame = this.pending.shift();
      if (frame === undefined) break;
      this.pendingBytes -= frame.frame.length;
      if (frame.compressed) {
        // The router offers no compression (`grpc-accept-encoding: identity`).
        this.sendStatus(
          status.UNIMPLEMENTED,
          'compressed messages are not accepted: send them uncompressed',
          [],
        );
        events.gone();
        return;
      }
      const message = decodeClientMessage(frame.message);
      if (message.kind === 'chunk' && message.wire === frame.message) {
        keepFrame(message.wire, frame.frame);
      }
      events.message(message);
    }
    if (this.endPending && !this.paused && !this.finished && this.pending.length === 0) {
      this.endPending = false;
      if (!this.reader.idle) {
        this.sendStatus(status.INTERNAL, 'the request stream ended inside a message', []);
        events.gone();
        return;
      }
      events.ended();
    }
  }

  /** A frame read whole: kept for delivery, in order. */
  private read(frame: GrpcFrame): void {
    this.pending.push(frame);
    this.pendingBytes += frame.frame.length;
    if (this.firstArrived) return;
    this.firstArrived = true;
    this.reader.limitTo(MAX_CLIENT_MESSAGE_BYTES);
    clearTimeout(this.firstMessageTimer);
    if (!this.paused) this.startIdleTimer();
  }

  /** Bytes of this call's messages the router holds and has not handed on. */
  private heldBytes(): number {
    return this.reader.heldBytes + this.pendingBytes + this.stream.readableLength;
  }

  private startIdleTimer(): void {
    if (this.bounds.idleMs <= 0 || this.requestEnded || this.finished || !this.firstArrived) return;
    if (this.idleTimer) this.idleTimer.refresh();
    else this.idleTimer = setTimeout(() => this.idlePassed(), this.bounds.idleMs);
  }

  private stopIdleTimer(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private firstMessageLate(): void {
    if (this.finished || this.firstArrived) return;
    this.endForBound(
      'DEADLINE_EXCEEDED',
      `the call's first message (its config) did not arrive within ` +
        `${formatDuration(this.bounds.firstMessageMs)} of the stream opening (FIRST_MESSAGE_TIMEOUT)`,
    );
  }

  private idlePassed(): void {
    if (this.finished || this.paused || this.requestEnded) return;
    this.endForBound(
      'DEADLINE_EXCEEDED',
      `the client sent nothing for ${formatDuration(this.bounds.idleMs)} before ending its ` +
        `request (STREAM_IDLE_TIMEOUT)`,
    );
  }

  /** Ends the stream for a bound the client broke; the call ends so, in the log too. */
  private endForBound(code: GrpcCodeName, details: string): void {
    this.sendStatus(status[code], details, []);
    this.events?.gone({ code, details });
  }

  /**
   * A frame too big to take, or more than the stream's budget allows: refused as gRPC refuses
   * it; the call sees the client leave.
   */
  private refuseFrames(error: unknown): void {
    if (error instanceof StreamLimitError) {
      this.endForBound(error.code, error.message);
      return;
    }
    const code = error instanceof FrameError ? error.code : 'INTERNAL';
    this.sendStatus(status[code], (error as Error).message, []);
    this.events?.gone();
  }

  private deadlinePassed(): void {
    if (this.finished) return;
    this.sendStatus(status.DEADLINE_EXCEEDED, 'Deadline exceeded', []);
    this.events?.gone();
  }

  private respond(): void {
    if (this.responded) return;
    this.responded = true;
    this.stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  }

  private sendStatus(code: number, details: string, trailers: readonly TrailerEntry[]): void {
    if (this.finished) return;
    this.finish();
    const { stream } = this;
    if (stream.destroyed || stream.closed) return;
    const statusHeaders = statusTrailers(code, details, trailers);
    if (!this.responded) {
      // Trailers-only: the status in the only headers the answer has.
      this.responded = true;
      stream.respond({ ...RESPONSE_HEADERS, ...statusHeaders }, { endStream: true });
    } else {
      this.trailers = statusHeaders;
      stream.end();
    }
    dropTheRest(stream, this.bounds.idleMs);
  }

  /** Nothing more is read or written: timers stop, held bytes are given back. */
  private finish(): void {
    this.finished = true;
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.firstMessageTimer);
    this.stopIdleTimer();
    this.reader.clear();
    this.pending.length = 0;
    this.pendingBytes = 0;
    this.bounds.budget?.hold(0);
  }
}

function noop(): void {}

/**
 * After the router's status: whatever the client still sends is read and dropped, so its window
 * never stalls, and a client that has not ended its side within `graceMs` (`STREAM_IDLE_TIMEOUT`;
 * 0: never) has the stream reset (`NO_ERROR`, as gRPC allows after the trailers), so it cannot
 * keep the stream open.
 */
export function dropTheRest(stream: ServerHttp2Stream, graceMs: number): void {
  stream.resume();
  if (stream.readableEnded || stream.closed) return;
  stream.on('data', noop);
  if (graceMs <= 0) return;
  const timer = setTimeout(() => {
    if (!stream.closed) stream.close(constants.NGHTTP2_NO_ERROR);
  }, graceMs);
  timer.unref();
  stream.once('close', () => clearTimeout(timer));
}
