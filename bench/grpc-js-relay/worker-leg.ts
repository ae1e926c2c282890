/**
 * One call's stream to its worker on grpc-js (`ExecutionService.Execute`): messages out with
 * backpressure, answers in, and one ending. `ended` is told exactly once: an OK status only after
 * every answer was delivered, an error status at once.
 */
import type { Metadata } from '@grpc/grpc-js';
import { status, type ClientDuplexStream, type StatusObject } from '@grpc/grpc-js';
import { NOT_STARTED, WORKER_TRAILERS, type CallTrailers } from '../../src/shared/call-trailers.js';
import type { RelayExecutionClient } from '../../src/router/calls/relay-codec.js';
import type { WorkerAnswer, WorkerMessage } from '../../src/core/calls/relay-messages.js';
import type { WorkerEnd, WorkerEndEvents } from '../../src/router/calls/call-ends.js';

/** The stream to a worker. */
export class WorkerLeg implements WorkerEnd {
  private final: StatusObject | undefined;
  private readEnded = false;
  private halfClosed = false;
  private reported = false;

  private constructor(
    private readonly stream: ClientDuplexStream<WorkerMessage, WorkerAnswer>,
    private readonly events: WorkerEndEvents,
  ) {
    stream.on('data', (answer: WorkerAnswer) => events.answer(answer));
    stream.on('end', () => {
      this.readEnded = true;
      this.maybeEnd();
    });
    stream.on('status', (final: StatusObject) => {
      this.final = final;
      this.maybeEnd();
    });
    stream.on('error', () => undefined); // the 'status' event carries the outcome
  }

  /** Opens the stream with a deadline (epoch ms) and metadata. */
  static open(
    client: RelayExecutionClient,
    metadata: Metadata,
    deadline: number,
    events: WorkerEndEvents,
  ): WorkerLeg {
    return new WorkerLeg(client.execute(metadata, { deadline }), events);
  }

  /** True once the worker's status arrived. */
  get finished(): boolean {
    return this.final !== undefined;
  }

  /** Sends a message; when the stream is full, returns false and calls `drained` once it is not. */
  send(message: WorkerMessage, drained: () => void): boolean {
    if (this.stream.write(message)) return true;
    this.stream.once('drain', drained);
    return false;
  }

  /** Tells the worker the payload is complete (once). */
  halfClose(): void {
    if (this.halfClosed) return;
    this.halfClosed = true;
    this.stream.end();
  }

  /** Stops delivering answers (the client is full). */
  pause(): void {
    this.stream.pause();
  }

  /** Delivers answers again. */
  resume(): void {
    this.stream.resume();
  }

  /** Cancels the worker call unless it already ended. */
  cancel(): void {
    if (!this.finished) this.stream.cancel();
  }

  private maybeEnd(): void {
    const final = this.final;
    if (this.reported || final === undefined) return;
    if (final.code === status.OK && !this.readEnded) return;
    this.reported = true;
    this.events.ended(final.code, final.details, readieTrailersOf(final));
  }
}

/**
 * The readie trailers of a worker's final status (src/shared/call-trailers.ts), and
 * `readie-not-started` when grpc-js never connected to the worker: nothing was sent, so nothing ran.
 */
export function readieTrailersOf(final: StatusObject): CallTrailers {
  const trailers: Record<string, string> = {};
  for (const name of WORKER_TRAILERS) {
    const value = final.metadata.get(name)[0];
    if (value !== undefined) trailers[name] = String(value);
  }
  if (final.code === status.UNAVAILABLE && final.details.startsWith('No connection established')) {
    return { ...trailers, ...NOT_STARTED };
  }
  return trailers;
}
