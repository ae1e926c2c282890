/**
 * The router's errors: each is a `StatusError`, carrying the gRPC status code name the caller
 * receives and a message an operator (or a client author) can act on. The shell maps code names to
 * its transport's numbers.
 */
import type { GrpcCodeName } from '../shared/grpc-codes.js';
import { StatusError } from '../shared/status-error.js';
import { requestInUseMessage } from './placement/request-owner.js';

export { requestInUseMessage };

/** The client's stream broke the wire contract: no config first, a second config, a big chunk. */
export class InvalidStreamError extends StatusError {
  override readonly name = 'InvalidStreamError';
  readonly code = 'INVALID_ARGUMENT';
}

/** A call of a session waited `SESSION_WAIT_TIMEOUT` for its turn and did not get it. */
export class SessionBusyError extends StatusError {
  override readonly name = 'SessionBusyError';
  readonly code = 'RESOURCE_EXHAUSTED';

  constructor(
    sessionId: string,
    readonly waitedMs: number,
    readonly ahead: number,
  ) {
    super(
      `session is busy: session ${sessionId} still had a call running (and ${ahead} waiting ahead) after ${waitedMs} ms; ` +
        'calls of one session run one at a time (raise SESSION_WAIT_TIMEOUT, or use another session)',
    );
  }
}

/** The caller went away (cancelled, or its deadline passed) before the call could run. */
export class CallAbandonedError extends StatusError {
  override readonly name = 'CallAbandonedError';
  readonly code = 'CANCELLED';
}

/** A request ID that is already in flight on this router. */
export class DuplicateRequestError extends StatusError {
  override readonly name = 'DuplicateRequestError';
  readonly code = 'ALREADY_EXISTS';

  constructor(requestId: string) {
    super(requestInUseMessage(requestId));
  }
}

/** Placement refused the call; carries placement's code and message unchanged. */
export class CallRejectedError extends StatusError {
  override readonly name = 'CallRejectedError';

  constructor(
    readonly code: GrpcCodeName,
    message: string,
  ) {
    super(message);
  }
}

/** A tenant's slots cannot be counted as asked (pinned calls of a tenant with no pin, ...). */
export class SlotsRefusedError extends StatusError {
  override readonly name = 'SlotsRefusedError';

  constructor(
    readonly code: GrpcCodeName,
    message: string,
  ) {
    super(message);
  }
}

/** A worker report that does not fit the registry contract (no worker ID, no status, ...). */
export class InvalidReportError extends StatusError {
  override readonly name = 'InvalidReportError';
  readonly code = 'INVALID_ARGUMENT';
}

/** The router cannot start as configured: missing TLS material, a bad catalogue file, ... */
export class RouterConfigError extends StatusError {
  override readonly name = 'RouterConfigError';
  readonly code = 'FAILED_PRECONDITION';
}

/** The event log failed to commit: the router must restart and recover from the log. */
export class LogUnavailableError extends StatusError {
  override readonly name = 'LogUnavailableError';
  readonly code = 'UNAVAILABLE';
}

/**
 * The status an error ends a call with: a `StatusError` keeps its code and message; anything else
 * is a bug, `INTERNAL`, saying so.
 */
export function statusOf(error: unknown): { code: GrpcCodeName; details: string } {
  if (error instanceof StatusError) return { code: error.code, details: error.message };
  const message = error instanceof Error ? error.message : String(error);
  return { code: 'INTERNAL', details: `internal router error: ${message}` };
}

/**
 * A worker registered with an ID that another live process of a worker holds (another instance,
 * at another address, still answering probes): two processes must never share one registration.
 */
export class WorkerIdTakenError extends StatusError {
  override readonly name = 'WorkerIdTakenError';
  readonly code = 'ALREADY_EXISTS';

  constructor(workerId: string, holder: { address: string | null; instanceId: string | null }) {
    super(
      `worker ID "${workerId}" is held by another live worker at ${holder.address ?? 'no address'}` +
        `${holder.instanceId === null ? '' : ` (instance ${holder.instanceId})`}: ` +
        'stop that worker, or start this one with another --id',
    );
  }
}
