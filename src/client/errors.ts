/**
 * The errors a call rejects with: one class per family of gRPC status, and the Python function's
 * own exception as {@link RemoteExecutionError}. Every one is a {@link ReadieError}.
 */
import { status as Status } from '@grpc/grpc-js';
import {
  LEADER_TRAILER,
  NO_TRAILERS,
  STANDBY_TRAILER,
  neverStarted,
  type CallTrailers,
  queueTimedOutTrailer,
} from '../shared/call-trailers.js';
import type { CallInfo } from './call-info.js';
import { causeOf, hintFor, missingModuleHint, neverSent } from './error-hints.js';

/** What every readie error may carry besides its message. */
export interface ReadieErrorFields {
  readonly code?: Status | undefined;
  readonly details?: string | undefined;
  readonly call?: CallInfo | undefined;
  readonly cause?: unknown;
  /** The cluster said the user's function never started (`readie-not-started`). */
  readonly notStarted?: boolean;
  /** The wait the cluster asked for before a retry (a shed's `retry-after-ms`), in ms. */
  readonly retryAfterMs?: number | undefined;
  /** A standby router refused the call (`readie-standby`). */
  readonly standby?: boolean;
  /** The leading router's address a standby named (`readie-leader`). */
  readonly leader?: string | undefined;
  /** The call waited `QUEUE_TIMEOUT` in the router's admission queue (`readie-queued`). */
  readonly queueTimedOut?: boolean;
}

/** The trailer of a refusal that says how long to wait before retrying (a shed), in ms. */
export const RETRY_AFTER_TRAILER = 'retry-after-ms';

/** The wait a refusal's trailers ask for, in ms (`retry-after-ms` or `readie-retry-after-ms`). */
export function retryAfterOf(trailers: CallTrailers): number | undefined {
  for (const name of [RETRY_AFTER_TRAILER, `readie-${RETRY_AFTER_TRAILER}`]) {
    const text = trailers[name]?.trim();
    if (text === undefined || text === '') continue;
    const millis = Number(text);
    if (Number.isFinite(millis) && millis >= 0) return Math.min(millis, 3_600_000);
  }
  return undefined;
}

/**
 * Base of every readie error: `code` is the gRPC status (undefined for local errors), `details`
 * the server's message, `call` the IDs of the call as far as they were known.
 */
export class ReadieError extends Error {
  override readonly name: string = 'ReadieError';
  readonly code: Status | undefined;
  readonly details: string;
  readonly call: CallInfo | undefined;
  /**
   * True when the cluster said the function never started (a refusal before it ran): such a call
   * can be retried as it is. False when it may have run, or the error is local.
   */
  readonly notStarted: boolean;
  /** The wait the cluster asked for before retrying (a shed's `retry-after-ms` trailer), in ms. */
  readonly retryAfterMs: number | undefined;
  /** True when a standby router refused the call (before anything ran): another router leads. */
  readonly standby: boolean;
  /** The address of the router that leads, as a standby named it (`readie-leader`). */
  readonly leader: string | undefined;
  /**
   * True when the call waited the router's `QUEUE_TIMEOUT` in its admission queue and left it
   * unplaced: the router waited for room already, so the clients do not retry it by themselves.
   */
  readonly queueTimedOut: boolean;
  /** In a map, the index of the input whose call failed (0 is the first). */
  inputIndex: number | undefined;

  constructor(message: string, fields: ReadieErrorFields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.code = fields.code;
    this.details = fields.details ?? '';
    this.call = fields.call;
    this.notStarted = fields.notStarted ?? false;
    this.retryAfterMs = fields.retryAfterMs;
    this.standby = fields.standby ?? false;
    this.leader = fields.leader;
    this.queueTimedOut = fields.queueTimedOut ?? false;
  }

  /** The status code's name (`UNAVAILABLE`), if the error has one. */
  get codeName(): string | undefined {
    return this.code === undefined ? undefined : Status[this.code];
  }
}

/** The client is not configured to reach a cluster (no address, unreadable CA file, ...). */
export class ConfigurationError extends ReadieError {
  override readonly name = 'ConfigurationError';
}

/** The cluster answered something the client cannot read: no result, a malformed envelope. */
export class ProtocolError extends ReadieError {
  override readonly name = 'ProtocolError';
}

/** The remote exception, as the executor described it. */
export interface RemoteException {
  /** The exception's class name (`ValueError`). */
  readonly type: string;
  /** The module of its class (`builtins`). */
  readonly module: string;
  readonly message: string;
  /** The remote traceback text. */
  readonly traceback: string;
}

/** The Python function raised on the worker. */
export class RemoteExecutionError extends ReadieError {
  override readonly name = 'RemoteExecutionError';
  readonly remoteType: string;
  readonly remoteModule: string;
  readonly remoteMessage: string;
  readonly traceback: string;

  constructor(exception: RemoteException, call?: CallInfo) {
    const qualified =
      exception.module === '' || exception.module === 'builtins'
        ? exception.type
        : `${exception.module}.${exception.type}`;
    let message = exception.message === '' ? qualified : `${qualified}: ${exception.message}`;
    const builtin = exception.module === '' || exception.module === 'builtins';
    const missing = builtin ? missingModuleHint(exception.type, exception.message) : undefined;
    if (missing !== undefined) message += `; ${missing}`;
    if (exception.traceback !== '') {
      message += `\n\nRemote traceback:\n${exception.traceback.trimEnd()}`;
    }
    super(message, { details: exception.message, call });
    this.remoteType = exception.type;
    this.remoteModule = exception.module;
    this.remoteMessage = exception.message;
    this.traceback = exception.traceback;
  }
}

/** CANCELLED: the call was cancelled, by its AbortSignal or `cancel()` (then `cause` is the reason) or by the cluster. */
export class CallCancelledError extends ReadieError {
  override readonly name = 'CallCancelledError';
}

/** UNKNOWN, INTERNAL or DATA_LOSS: the cluster failed on its side; the call may be retried. */
export class InternalServerError extends ReadieError {
  override readonly name = 'InternalServerError';
}

/** INVALID_ARGUMENT or OUT_OF_RANGE: refused as malformed (bad package, unknown checkpoint, ...). */
export class InvalidRequestError extends ReadieError {
  override readonly name = 'InvalidRequestError';
}

/** DEADLINE_EXCEEDED: the call ran past its deadline, or the executor never answered. */
export class RemoteTimeoutError extends ReadieError {
  override readonly name = 'RemoteTimeoutError';
}

/**
 * NOT_FOUND: what a request named is not there (a call or its output the history does not hold
 * for this tenant, an image); a session that is gone is its own kind, `SessionExpiredError`.
 */
export class NotFoundError extends ReadieError {
  override readonly name: string = 'NotFoundError';
}

/** NOT_FOUND: the session's container or worker is gone, and its Python state with it. */
export class SessionExpiredError extends NotFoundError {
  override readonly name: string = 'SessionExpiredError';
}

/** ALREADY_EXISTS or ABORTED: the call collided with another (e.g. a reused request ID). */
export class ConflictError extends ReadieError {
  override readonly name = 'ConflictError';
}

/**
 * RESOURCE_EXHAUSTED with `readie-killed: out-of-memory`: the function ran and was killed for
 * exceeding its memory budget (`memoryBudget`, bytes, when the worker said). Ask for more memory.
 */
export class RemoteOutOfMemoryError extends ReadieError {
  override readonly name = 'RemoteOutOfMemoryError';
  readonly memoryBudget: number | undefined;

  constructor(message: string, fields: ReadieErrorFields & { memoryBudget?: number }) {
    super(message, fields);
    this.memoryBudget = fields.memoryBudget;
  }
}

/** PERMISSION_DENIED: the token is valid but not allowed to do this. */
export class PermissionDeniedError extends ReadieError {
  override readonly name = 'PermissionDeniedError';
}

/** RESOURCE_EXHAUSTED: no worker has room, or the session stayed busy too long. */
export class ResourceExhaustedError extends ReadieError {
  override readonly name: string = 'ResourceExhaustedError';
}

/**
 * RESOURCE_EXHAUSTED marked `readie-never-fits`: no ready worker of the cluster could ever take
 * the call as asked (its memory or GPU memory above every worker's offer, or a GPU call with no
 * gpu worker). Final: neither a fan-out nor a spawned call retries it.
 */
export class NeverFitsError extends ResourceExhaustedError {
  override readonly name: string = 'NeverFitsError';
}

/**
 * RESOURCE_EXHAUSTED with a retry-after hint: a pinned call was shed because its version is
 * loading on the worker that must load it. The client retries a shed on its own (`shedRetries`,
 * within `timeoutMs`); this is the rejection once it gives up. `retryAfterMs` is the hint.
 */
export class ShedError extends ResourceExhaustedError {
  override readonly name: string = 'ShedError';
  override readonly retryAfterMs: number;

  constructor(message: string, fields: ReadieErrorFields & { readonly retryAfterMs: number }) {
    super(message, fields);
    this.retryAfterMs = fields.retryAfterMs;
  }

  /** The hint in seconds. */
  get retryAfter(): number {
    return this.retryAfterMs / 1000;
  }
}

/** FAILED_PRECONDITION: a package did not install, Python versions differ, or the session's container contradicts the options. */
export class PreconditionError extends ReadieError {
  override readonly name = 'PreconditionError';
}

/** UNIMPLEMENTED: the server does not offer readie's ProxyService. */
export class UnsupportedError extends ReadieError {
  override readonly name = 'UnsupportedError';
}

/** UNAVAILABLE: the router cannot be reached, or no worker can take the call now. */
export class ClusterUnavailableError extends ReadieError {
  override readonly name = 'ClusterUnavailableError';
}

/** UNAUTHENTICATED: the router wants a token (READIE_AUTH_TOKEN) and got none or a wrong one. */
export class AuthenticationError extends ReadieError {
  override readonly name = 'AuthenticationError';
}

type ErrorClass = new (message: string, fields: ReadieErrorFields) => ReadieError;

/** Every status but OK: its class and what it means, in words an operator can act on. */
const BY_STATUS: Readonly<Record<Exclude<Status, Status.OK>, readonly [ErrorClass, string]>> = {
  [Status.CANCELLED]: [CallCancelledError, 'the call was cancelled by the cluster'],
  [Status.UNKNOWN]: [InternalServerError, 'the cluster failed with an unknown error'],
  [Status.INVALID_ARGUMENT]: [InvalidRequestError, 'the cluster refused the call as invalid'],
  [Status.DEADLINE_EXCEEDED]: [RemoteTimeoutError, 'the call ran out of time'],
  [Status.NOT_FOUND]: [SessionExpiredError, 'the session has expired'],
  [Status.ALREADY_EXISTS]: [ConflictError, 'the call collides with an existing one'],
  [Status.PERMISSION_DENIED]: [PermissionDeniedError, 'the call is not permitted'],
  [Status.RESOURCE_EXHAUSTED]: [ResourceExhaustedError, 'the cluster has no room for the call'],
  [Status.FAILED_PRECONDITION]: [PreconditionError, 'the call cannot run as asked'],
  [Status.ABORTED]: [ConflictError, 'the call was aborted'],
  [Status.OUT_OF_RANGE]: [InvalidRequestError, 'the call asked for something out of range'],
  [Status.UNIMPLEMENTED]: [UnsupportedError, "the server does not implement readie's ProxyService"],
  [Status.INTERNAL]: [InternalServerError, 'the cluster failed internally'],
  [Status.UNAVAILABLE]: [ClusterUnavailableError, 'the cluster is unavailable'],
  [Status.DATA_LOSS]: [InternalServerError, 'the cluster lost data of the call'],
  [Status.UNAUTHENTICATED]: [AuthenticationError, 'the cluster refused the credentials'],
};

/** Where an error happened, for its message and fields. */
export interface ErrorContext {
  readonly address?: string;
  readonly call?: CallInfo;
  readonly cause?: unknown;
  /** The readie trailers of the failed call (src/shared/call-trailers.ts). */
  readonly trailers?: CallTrailers;
  /** Whether the client spoke plaintext. */
  readonly insecure?: boolean;
  /** A plaintext client's probe found that the address speaks TLS. */
  readonly speaksTls?: boolean;
  /** A shed's hint (its trailers' `retry-after-ms` or `google.rpc.RetryInfo`), in ms. */
  readonly retryAfterMs?: number;
  /**
   * A `TenantService` request (a call's record or output, an image): its NOT_FOUND means that
   * what it named is not there (`NotFoundError`), not that a session expired.
   */
  readonly lookup?: boolean;
}

/**
 * The error for a call that ended with gRPC status `code` (OK without a result is a
 * ProtocolError): the family's class (an out-of-memory kill its own), and a message that names
 * the code, the address and the one hint for the cause (src/client/error-hints.ts).
 */
export function errorFromStatus(
  code: Status,
  details: string | undefined,
  context: ErrorContext = {},
): ReadieError {
  if (code === Status.OK) {
    return new ProtocolError('the call ended without a result', { call: context.call });
  }
  const trailers = context.trailers ?? NO_TRAILERS;
  const insecure = context.insecure ?? false;
  const address = context.address ?? '';
  const cause = causeOf({
    code,
    details: details ?? '',
    trailers,
    insecure,
    speaksTls: context.speaksTls,
    ...(context.retryAfterMs === undefined ? {} : { retryAfterMs: context.retryAfterMs }),
  });
  // A tenant-service request's NOT_FOUND: what it named is not there (no session hint either).
  const lookupMissed = code === Status.NOT_FOUND && context.lookup === true;
  const [ErrorType, summary] = lookupMissed
    ? ([NotFoundError, 'not found'] as const)
    : BY_STATUS[code];
  const where = address === '' ? '' : ` at ${address}`;
  let message = `${summary}${where} (${Status[code]})`;
  // grpc-js's connection errors span lines and end with an empty "Resolution note".
  const said = (details ?? '')
    .replace(/\s+/g, ' ')
    .replace(/\.? Resolution note: ?$/, '')
    .trim();
  if (said !== '') message += `: ${said}`;
  const hint = lookupMissed ? undefined : hintFor(cause, { address, insecure, trailers });
  // The router's refusal of a call without a token says already which variable to set.
  const saidSo = cause.kind === 'unauthenticated' && said.includes('READIE_AUTH_TOKEN');
  if (hint !== undefined && !saidSo) message += `; ${hint}`;
  const fields = {
    code,
    details: details ?? '',
    call: context.call,
    cause: context.cause,
    // A refusal the cluster marked, or a connection that never came up: nothing was sent.
    notStarted: neverStarted(trailers) || neverSent(cause),
    retryAfterMs: context.retryAfterMs ?? retryAfterOf(trailers),
    standby: trailers[STANDBY_TRAILER] === '1',
    leader: trailers[LEADER_TRAILER]?.trim() || undefined,
    queueTimedOut: queueTimedOutTrailer(trailers),
  };
  if (cause.kind === 'shed') {
    return new ShedError(message.replace(summary, 'the call was shed'), {
      ...fields,
      // A shed is a refusal before the function started, whatever the trailers said.
      notStarted: true,
      retryAfterMs: cause.retryAfterMs,
    });
  }
  if (cause.kind === 'never-fits') {
    return new NeverFitsError(message.replace(summary, 'the call can never fit'), fields);
  }
  if (cause.kind === 'out-of-memory') {
    return new RemoteOutOfMemoryError(
      message.replace(summary, 'the call ran out of memory'),
      cause.budget === null ? fields : { ...fields, memoryBudget: cause.budget },
    );
  }
  return new ErrorType(message, fields);
}
