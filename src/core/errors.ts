/**
 * The router's errors: each carries the gRPC status code the caller receives and a message an
 * operator (or a client author) can act on. Pure: the shell maps code names to grpc-js numbers.
 */
import type { GrpcCodeName } from './placement/index.js';

/** An error the router reports with a gRPC status code. */
export abstract class RouterError extends Error {
  /** The gRPC status code name the caller receives. */
  abstract readonly code: GrpcCodeName;
}

/** The client's stream broke the wire contract: no config first, a second config, a big chunk. */
export class InvalidStreamError extends RouterError {
  override readonly name = 'InvalidStreamError';
  readonly code = 'INVALID_ARGUMENT';
}

/** A call of a session waited `SESSION_WAIT_TIMEOUT` for its turn and did not get it. */
export class SessionBusyError extends RouterError {
  override readonly name = 'SessionBusyError';
  readonly code = 'RESOURCE_EXHAUSTED';

  constructor(sessionId: string, waitedMs: number, ahead: number) {
    super(
      `session is busy: session ${sessionId} still had a call running (and ${ahead} waiting ahead) after ${waitedMs} ms; ` +
        'calls of one session run one at a time (raise SESSION_WAIT_TIMEOUT, or use another session)',
    );
  }
}

/** The caller went away (cancelled, or its deadline passed) before the call could run. */
export class CallAbandonedError extends RouterError {
  override readonly name = 'CallAbandonedError';
  readonly code = 'CANCELLED';
}

/** A request ID that is already in flight on this router. */
export class DuplicateRequestError extends RouterError {
  override readonly name = 'DuplicateRequestError';
  readonly code = 'ALREADY_EXISTS';

  constructor(requestId: string) {
    super(`request ${requestId} is already in flight: every call needs its own request ID`);
  }
}

/** Placement refused the call; carries placement's code and message unchanged. */
export class CallRejectedError extends RouterError {
  override readonly name = 'CallRejectedError';

  constructor(
    readonly code: GrpcCodeName,
    message: string,
  ) {
    super(message);
  }
}

/** A worker report that does not fit the registry contract (no worker ID, no status, ...). */
export class InvalidReportError extends RouterError {
  override readonly name = 'InvalidReportError';
  readonly code = 'INVALID_ARGUMENT';
}

/** The router cannot start as configured: missing TLS material, a bad catalogue file, ... */
export class RouterConfigError extends RouterError {
  override readonly name = 'RouterConfigError';
  readonly code = 'FAILED_PRECONDITION';
}

/** The event log failed to commit: the router must restart and recover from the log. */
export class LogUnavailableError extends RouterError {
  override readonly name = 'LogUnavailableError';
  readonly code = 'UNAVAILABLE';
}
