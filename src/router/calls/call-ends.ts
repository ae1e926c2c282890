/**
 * What the call shell (`call-relay.ts`) needs of a transport: the client's end of the call and a
 * way to reach workers. The platform's HTTP/2 (`src/router/wire/`) implements them, relaying
 * messages as the frames they arrived as; so does grpc-js, the first relay, kept as a benchmark
 * baseline (`bench/grpc-js-relay/`).
 */
import type { CallHeader } from '../../proto/gen/readie/v1/execution.js';
import type { TrailerEntry } from '../../core/calls/answer-trailers.js';
import type { CallTrailers } from '../../shared/call-trailers.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type {
  ClientAnswer,
  ClientMessage,
  WorkerAnswer,
  WorkerMessage,
} from '../../core/calls/relay-messages.js';

/** What the client's end tells its call. */
export interface ClientEndEvents {
  message(message: ClientMessage): void;
  /** The client half-closed. */
  ended(): void;
  /**
   * The client cancelled, disconnected, or its deadline passed; or the transport ended the stream
   * for a bound it broke (`ending`: the code and words the call ends with, in the log too).
   */
  gone(ending?: { readonly code: GrpcCodeName; readonly details: string }): void;
}

/** The client's stream of one `RequestExecution` call. */
export interface ClientEnd {
  /** The client's deadline, epoch ms (Infinity: none). */
  readonly deadline: number;
  listen(events: ClientEndEvents): void;
  /** Stops reading the client's messages (flow control holds the rest back). */
  pause(): void;
  resume(): void;
  /** Writes an answer; false when the stream is full, and then `drained` is called once. */
  write(answer: ClientAnswer, drained: () => void): boolean;
  /** Ends the call OK, with these trailers (`answer-trailers.ts`). */
  end(trailers: readonly TrailerEntry[]): void;
  /** Ends the call with an error status and these trailers. */
  fail(code: GrpcCodeName, details: string, trailers: readonly TrailerEntry[]): void;
}

/** What a worker's end tells its call. */
export interface WorkerEndEvents {
  answer(answer: WorkerAnswer): void;
  /**
   * The worker's status, once: an OK one after every answer was delivered, an error at once,
   * with the readie trailers it carried (and `readie-not-started` when nothing reached it).
   */
  ended(code: number, details: string, trailers: CallTrailers): void;
}

/** One call's stream to its worker. */
export interface WorkerEnd {
  /** Sends a message; false when the stream is full, and then `drained` is called once. */
  send(message: WorkerMessage, drained: () => void): boolean;
  /** The payload is complete (once). */
  halfClose(): void;
  /** Stops delivering answers (the client is full). */
  pause(): void;
  resume(): void;
  /** Cancels the worker call unless it already ended. */
  cancel(): void;
}

/** The router's way to workers. */
export interface WorkerLinks {
  /**
   * Connects to `address` (nothing is sent): resolves once connected, rejects with what went
   * wrong (refused, no route, TLS, not up by `deadline`, epoch ms).
   */
  dial(address: string, deadline: number): Promise<void>;
  /** Opens `ExecutionService.Execute` with the router's credentials, sending `header` first. */
  open(address: string, deadline: number, header: CallHeader, events: WorkerEndEvents): WorkerEnd;
}
