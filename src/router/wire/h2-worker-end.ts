/**
 * One call's stream to its worker (`ExecutionService.Execute`) on the platform's HTTP/2: the
 * header first, then the client's chunks as the frames they arrived in; answers read as frames
 * (their IDs decoded, the rest kept as bytes); one ending, told once: an OK status after every
 * answer was delivered, an error at once. The call's deadline travels as `grpc-timeout` and is
 * enforced here too, as a gRPC client does.
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { status } from '@grpc/grpc-js';
import { NOT_STARTED, WORKER_TRAILERS, type CallTrailers } from '../../shared/call-trailers.js';
import type { WorkerMessage } from '../../core/calls/relay-messages.js';
import type { WorkerEnd, WorkerEndEvents } from '../calls/call-ends.js';
import { decodeWorkerAnswer, encodeWorkerMessage } from '../calls/relay-codec.js';
import { framed, FrameReader } from './grpc-frames.js';
import { decodeGrpcMessage, headerText } from './grpc-headers.js';
import { keepFrame, keptFrame } from './kept-frames.js';

/** The largest answer the router takes from a worker (a 1 MiB chunk and its framing fit). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** gRPC codes for an HTTP/2 stream reset without a status (as gRPC clients map them). */
function resetCode(rstCode: number): number {
  switch (rstCode) {
    case constants.NGHTTP2_REFUSED_STREAM:
      return status.UNAVAILABLE;
    case constants.NGHTTP2_CANCEL:
      return status.CANCELLED;
    case constants.NGHTTP2_ENHANCE_YOUR_CALM:
      return status.RESOURCE_EXHAUSTED;
    case constants.NGHTTP2_INADEQUATE_SECURITY:
      return status.PERMISSION_DENIED;
    default:
      return status.INTERNAL;
  }
}

/** The worker's readie trailers (src/shared/call-trailers.ts) among its trailing headers. */
function readieTrailersOf(headers: IncomingHttpHeaders): CallTrailers {
  const trailers: Record<string, string> = {};
  for (const name of WORKER_TRAILERS) {
    const value = headerText(headers, name);
    if (value !== undefined) trailers[name] = value;
  }
  return trailers;
}

/** The stream to a worker. */
export class H2WorkerEnd implements WorkerEnd {
  private readonly reader = new FrameReader(MAX_ANSWER_BYTES);
  private final: { code: number; details: string; trailers: CallTrailers } | undefined;
  private readEnded = false;
  private halfClosed = false;
  private reported = false;
  private readonly deadlineTimer: NodeJS.Timeout;

  constructor(
    private readonly stream: ClientHttp2Stream,
    private readonly events: WorkerEndEvents,
    timeoutMs: number,
  ) {
    this.deadlineTimer = setTimeout(() => {
      this.ended(status.DEADLINE_EXCEEDED, 'Deadline exceeded', {});
      stream.close(constants.NGHTTP2_CANCEL);
    }, timeoutMs);
    stream.on('response', (headers) => {
      // A trailers-only answer: the status is in the headers.
      if (headers['grpc-status'] !== undefined) this.trailed(headers);
    });
    stream.on('trailers', (headers: IncomingHttpHeaders) => this.trailed(headers));
    stream.on('data', (piece: Buffer) => {
      if (this.reported) return;
      try {
        this.reader.push(piece, (frame) => {
          const answer = decodeWorkerAnswer(frame.message);
          if (answer.wire === frame.message) keepFrame(answer.wire, frame.frame);
          this.events.answer(answer);
        });
      } catch (error) {
        this.ended(
          status.INTERNAL,
          `Failed to parse server response: ${(error as Error).message}`,
          {},
        );
        stream.close(constants.NGHTTP2_CANCEL);
      }
    });
    stream.on('end', () => {
      this.readEnded = true;
      this.maybeEnd();
    });
    stream.on('error', () => undefined); // 'close' tells the outcome
    // A closed stream no longer names its session: keep it, to tell a lost connection apart.
    const session = stream.session;
    stream.on('close', () => {
      if (this.final === undefined) {
        const rst = stream.rstCode ?? constants.NGHTTP2_NO_ERROR;
        if (session?.destroyed === true && rst !== constants.NGHTTP2_REFUSED_STREAM) {
          // The connection went (the worker died, or stopped answering keepalives): Node closes
          // its streams with CANCEL (or INTERNAL after a reset), which is not what happened.
          this.ended(status.UNAVAILABLE, 'Connection dropped', {});
        } else if (rst === constants.NGHTTP2_REFUSED_STREAM) {
          // HTTP/2's word that the stream was not processed at all: nothing ran.
          this.ended(status.UNAVAILABLE, 'the worker refused the stream', NOT_STARTED);
        } else if (rst === constants.NGHTTP2_NO_ERROR) {
          this.ended(status.UNAVAILABLE, 'Connection dropped', {});
        } else {
          this.ended(resetCode(rst), `Received RST_STREAM with code ${rst}`, {});
        }
      }
      this.readEnded = true;
      this.maybeEnd();
    });
  }

  send(message: WorkerMessage, drained: () => void): boolean {
    if (this.reported) return true;
    const wire = encodeWorkerMessage(message);
    if (this.stream.write(keptFrame(wire) ?? framed(wire))) return true;
    this.stream.once('drain', drained);
    return false;
  }

  halfClose(): void {
    if (this.halfClosed) return;
    this.halfClosed = true;
    if (!this.stream.closed) this.stream.end();
  }

  pause(): void {
    this.stream.pause();
  }

  resume(): void {
    this.stream.resume();
  }

  cancel(): void {
    if (this.reported) return;
    this.reported = true;
    clearTimeout(this.deadlineTimer);
    if (!this.stream.closed) this.stream.close(constants.NGHTTP2_CANCEL);
  }

  private trailed(headers: IncomingHttpHeaders): void {
    if (this.final !== undefined) return;
    const code = Number(headerText(headers, 'grpc-status') ?? status.UNKNOWN);
    this.final = {
      code: Number.isInteger(code) ? code : status.UNKNOWN,
      details: decodeGrpcMessage(headers['grpc-message']),
      trailers: readieTrailersOf(headers),
    };
    this.maybeEnd();
  }

  /** An ending the router saw itself (deadline, a reset, a bad answer). */
  private ended(code: number, details: string, trailers: CallTrailers): void {
    if (this.final !== undefined) return;
    this.final = { code, details, trailers };
    this.readEnded = true;
    this.maybeEnd();
  }

  private maybeEnd(): void {
    const final = this.final;
    if (this.reported || final === undefined) return;
    if (final.code === Number(status.OK) && !this.readEnded) return;
    this.reported = true;
    clearTimeout(this.deadlineTimer);
    this.events.ended(final.code, final.details, final.trailers);
  }
}
