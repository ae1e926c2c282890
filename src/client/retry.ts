/**
 * When a fan-out retries a call, and how long it waits first (the Python client's
 * `readie._retry`, the same rules). A refusal before the function started for lack of room
 * (`RESOURCE_EXHAUSTED`: no worker has room, the session is busy, a shed) is waited out and retried
 * (never a call that never fits, `NeverFitsError`: no wait makes room for it)
 * with exponential backoff (50 ms doubling to 2 s, with jitter) or the wait the cluster asked for,
 * whichever is longer; one before the function started with `UNAVAILABLE` likewise, at most
 * {@link MAX_UNAVAILABLE_RETRIES} times. A call that may have run is retried only when asked
 * (`retries`), never when the request itself is wrong (credentials, an invalid request, a failed
 * precondition).
 */
import { status as Status } from '@grpc/grpc-js';
import {
  AuthenticationError,
  CallCancelledError,
  ConfigurationError,
  InvalidRequestError,
  NeverFitsError,
  PermissionDeniedError,
  PreconditionError,
  ReadieError,
  RemoteExecutionError,
  SessionExpiredError,
  UnsupportedError,
} from './errors.js';
import { causeOf, neverSent } from './error-hints.js';

/** The first wait before retrying a refusal, in ms. */
export const FIRST_BACKOFF_MS = 50;
/** The longest wait between two attempts of a refused call (a hint may ask for more), in ms. */
export const MAX_BACKOFF_MS = 2_000;
/** `UNAVAILABLE` refusals before the function started are retried this many times, then raised. */
export const MAX_UNAVAILABLE_RETRIES = 20;

/** Whether `error` is a refusal before the function started that waiting can cure. */
export function waitsForRoom(error: unknown, unavailableRetries = 0): error is ReadieError {
  if (!(error instanceof ReadieError) || !error.notStarted) return false;
  // No wait makes room for a call that never fits: final.
  if (error instanceof NeverFitsError) return false;
  // The router waited for room already (QUEUE_TIMEOUT in its admission queue): final.
  if (error.queueTimedOut) return false;
  if (error.code === Status.RESOURCE_EXHAUSTED) return true;
  if (error.code !== Status.UNAVAILABLE || unavailableRetries >= MAX_UNAVAILABLE_RETRIES)
    return false;
  // The cluster's own refusal, not a router this client could not reach (nothing to wait for).
  return !neverSent(
    causeOf({ code: error.code, details: error.details, trailers: {}, insecure: false }),
  );
}

/** Whether a map slot moves to a new session after `error` (its container is or may be gone). */
export function needsNewSession(error: unknown): boolean {
  if (error instanceof SessionExpiredError) return true;
  return (
    error instanceof ReadieError && !(error instanceof RemoteExecutionError) && !error.notStarted
  );
}

/** Whether `retries` may retry `error`: a call that ran (or may have), not a wrong request. */
export function mayRetryRan(error: unknown): boolean {
  return (
    error instanceof ReadieError &&
    !(
      error instanceof AuthenticationError ||
      error instanceof CallCancelledError ||
      error instanceof ConfigurationError ||
      error instanceof InvalidRequestError ||
      error instanceof NeverFitsError ||
      error instanceof PermissionDeniedError ||
      error instanceof PreconditionError ||
      error instanceof UnsupportedError
    )
  );
}

/**
 * Ms to wait before attempt `attempt + 1` of a refused call: exponential with jitter (half to
 * all of the step), never less than the cluster's `hintMs`. `random` in [0, 1).
 */
export function backoffMs(
  attempt: number,
  hintMs?: number,
  random: () => number = Math.random,
): number {
  const step = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.min(attempt, 16));
  const wait = step * (0.5 + random() / 2);
  return hintMs === undefined ? wait : Math.max(wait, hintMs);
}
