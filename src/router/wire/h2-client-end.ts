/**
 * The client's end of a `RequestExecution` call on the platform's HTTP/2: the stream's DATA split
 * into messages (only their first bytes read: a chunk stays the frame it arrived as), answers
 * written as frames (a worker's answer under the router's IDs is its own frame, unchanged), the
 * status in trailers. HTTP/2 flow control is the backpressure: a paused call reads nothing more,
 * so the client's window closes. The client's deadline (`grpc-timeout`) is enforced here, as a
 * gRPC server does.
 */
import type { OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { status } from '@grpc/grpc-js';
import type { TrailerEntry } from '../../core/calls/answer-trailers.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { ClientAnswer } from '../../core/calls/relay-messages.js';
import type { ClientEnd, ClientEndEvents } from '../calls/call-ends.js';
import { clientAnswerParts, decodeClientMessage } from '../calls/relay-codec.js';
import { FrameError, FrameReader, framedParts, type GrpcFrame } from './grpc-frames.js';
import { RESPONSE_HEADERS, statusTrailers } from './grpc-headers.js';
import { keepFrame, keptFrame } from './kept-frames.js';

/** The largest message a client may send (gRPC's default, as grpc-js enforced it). */
export const MAX_CLIENT_MESSAGE_BYTES = 4 * 1024 * 1024;

/** A `RequestExecution` stream served on `node:http2`. */
export class H2ClientEnd implements ClientEnd {
  private readonly reader = new FrameReader(MAX_CLIENT_MESSAGE_BYTES);
  private events: ClientEndEvents | undefined;
  /** Frames read while the call was paused, to deliver in order on resume. */
  private readonly pending: GrpcFrame[] = [];
  private paused = false;
  private endPending = false;
  private responded = false;
  /** The status to send once the stream asks for its trailers. */
  private trailers: OutgoingHttpHeaders | undefined;
  /** True once a status is sent or the stream closed: nothing more is delivered or written. */
  private finished = false;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    /** Epoch ms (Infinity: none). */
    readonly deadline: number,
    now: number,
  ) {
    stream.on('error', () => undefined); // 'close' tells the outcome
    stream.on('wantTrailers', () => stream.sendTrailers(this.trailers ?? { 'grpc-status': '0' }));
    if (Number.isFinite(deadline)) {
      this.deadlineTimer = setTimeout(() => this.deadlinePassed(), Math.max(0, deadline - now));
    }
  }

  listen(events: ClientEndEvents): void {
    this.events = events;
    const { stream } = this;
    stream.on('data', (piece: Buffer) => {
      if (this.finished) return;
      try {
        this.reader.push(piece, (frame) => this.pending.push(frame));
      } catch (error) {
        this.refuseFrames(error);
        return;
      }
      this.deliver();
    });
    stream.on('end', () => {
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
    this.stream.pause();
  }

  resume(): void {
    this.paused = false;
    this.deliver();
    if (!this.paused) this.stream.resume();
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

  /** A frame too big to take: refused as gRPC refuses it; the call sees the client leave. */
  private refuseFrames(error: unknown): void {
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
    // Whatever the client still sends is read and dropped, so its window never stalls.
    stream.resume();
    if (stream.readableEnded) return;
    stream.on('data', noop);
  }

  private finish(): void {
    this.finished = true;
    clearTimeout(this.deadlineTimer);
  }
}

function noop(): void {}
