/**
 * The call's ends on grpc-js: the client's `RequestExecution` stream as grpc-js serves it, and
 * workers reached through grpc-js channels. The first transport of the call shell; the platform's
 * HTTP/2 one (`src/router/wire/`) does the same with fewer layers.
 */
import { status, type Metadata, type ServerDuplexStream } from '@grpc/grpc-js';
import type { CallHeader } from '../../src/proto/gen/readie/v1/execution.js';
import type { TrailerEntry } from '../../src/core/calls/answer-trailers.js';
import type { GrpcCodeName } from '../../src/shared/grpc-codes.js';
import type { ClientAnswer, ClientMessage } from '../../src/core/calls/relay-messages.js';
import type { WorkerConnections } from '../../src/router/workers/index.js';
import type {
  ClientEnd,
  ClientEndEvents,
  WorkerEnd,
  WorkerEndEvents,
  WorkerLinks,
} from '../../src/router/calls/call-ends.js';
import { trailerMetadata } from './trailer-metadata.js';
import { WorkerLeg } from './worker-leg.js';

/** Epoch ms of a grpc-js deadline (Infinity when none). */
function deadlineMs(deadline: Date | number): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** A `RequestExecution` stream served by grpc-js. */
export class GrpcJsClientEnd implements ClientEnd {
  readonly deadline: number;

  constructor(private readonly call: ServerDuplexStream<ClientMessage, ClientAnswer>) {
    this.deadline = deadlineMs(call.getDeadline());
  }

  listen(events: ClientEndEvents): void {
    this.call.on('data', (message: ClientMessage) => events.message(message));
    this.call.on('end', () => events.ended());
    // Also told after a status: the machine is done by then and ignores it.
    this.call.on('cancelled', () => events.gone());
  }

  pause(): void {
    this.call.pause();
  }

  resume(): void {
    this.call.resume();
  }

  write(answer: ClientAnswer, drained: () => void): boolean {
    if (this.call.write(answer)) return true;
    this.call.once('drain', drained);
    return false;
  }

  end(trailers: readonly TrailerEntry[]): void {
    this.call.end(trailerMetadata(trailers));
  }

  fail(code: GrpcCodeName, details: string, trailers: readonly TrailerEntry[]): void {
    this.call.emit('error', { code: status[code], details, metadata: trailerMetadata(trailers) });
  }
}

/** Workers through the router's grpc-js channels, presenting the router's own token. */
export class GrpcJsWorkerLinks implements WorkerLinks {
  constructor(
    private readonly connections: WorkerConnections,
    /** Kept current by the credentials; each call sends a clone (grpc-js writes into it). */
    private readonly workerMetadata: Metadata,
  ) {}

  dial(address: string, deadline: number): Promise<void> {
    return this.connections.dial(address, deadline);
  }

  open(address: string, deadline: number, header: CallHeader, events: WorkerEndEvents): WorkerEnd {
    const leg = WorkerLeg.open(
      this.connections.execution(address),
      this.workerMetadata.clone(),
      deadline,
      events,
    );
    leg.send({ kind: 'header', header }, () => undefined);
    return leg;
  }
}
