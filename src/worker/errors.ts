/**
 * The worker's errors: each carries the gRPC status code the call ends with and a message an
 * operator (or the user reading their client's exception) can act on.
 */
import { status } from '@grpc/grpc-js';

/** A failure that ends a call with a specific gRPC status. */
export abstract class WorkerError extends Error {
  /** The gRPC status code the call ends with. */
  abstract readonly code: status;
}

/** The router's stream is malformed (no header first, an oversized chunk, a bad requirement). */
export class InvalidCallError extends WorkerError {
  override readonly name = 'InvalidCallError';
  readonly code = status.INVALID_ARGUMENT;
}

/** The client's Python major.minor differs from the sandbox's; nothing ran. */
export class PythonVersionMismatchError extends WorkerError {
  override readonly name = 'PythonVersionMismatchError';
  readonly code = status.FAILED_PRECONDITION;
}

/** The call was placed on another worker than this one. */
export class WrongWorkerError extends WorkerError {
  override readonly name = 'WrongWorkerError';
  readonly code = status.FAILED_PRECONDITION;
}

/** The requested packages did not install; the container stays usable. */
export class PackageInstallError extends WorkerError {
  override readonly name = 'PackageInstallError';
  readonly code = status.FAILED_PRECONDITION;
}

/** No container could be created (at the container limit, or the sandbox failed to start). */
export class ContainerUnavailableError extends WorkerError {
  override readonly name = 'ContainerUnavailableError';
  readonly code = status.RESOURCE_EXHAUSTED;
}

/** The router named a container this worker does not hold (destroyed, or never created here). */
export class ContainerNotFoundError extends WorkerError {
  override readonly name = 'ContainerNotFoundError';
  readonly code = status.NOT_FOUND;
}

/** The router named a container of another session: no session resumes another's container. */
export class ContainerOwnedError extends WorkerError {
  override readonly name = 'ContainerOwnedError';
  readonly code = status.PERMISSION_DENIED;
}

/** The router named a container that is running another call. */
export class ContainerBusyError extends WorkerError {
  override readonly name = 'ContainerBusyError';
  readonly code = status.RESOURCE_EXHAUSTED;
}

/** The executor never answered: it did not accept a connection, or the call outlived its time. */
export class ExecutorTimeoutError extends WorkerError {
  override readonly name = 'ExecutorTimeoutError';
  readonly code = status.DEADLINE_EXCEEDED;
}

/** The executor went away mid-call (out of memory, a crash, an exit) or broke the protocol. */
export class ExecutorLostError extends WorkerError {
  override readonly name = 'ExecutorLostError';
  readonly code = status.UNAVAILABLE;
}

/** The worker is leaving and takes no new calls. */
export class ShuttingDownError extends WorkerError {
  override readonly name = 'ShuttingDownError';
  readonly code = status.UNAVAILABLE;
}

/** The caller did not present the router's token. */
export class UnauthenticatedError extends WorkerError {
  override readonly name = 'UnauthenticatedError';
  readonly code = status.UNAUTHENTICATED;
}

/** The worker cannot start: a bad flag, no Python, no cgroups. Not a call's error. */
export class WorkerStartupError extends Error {
  override readonly name = 'WorkerStartupError';
}

/** The worker is in error status (no Python, no cgroups, a sandbox that does not start). */
export class WorkerUnusableError extends WorkerError {
  override readonly name = 'WorkerUnusableError';
  readonly code = status.UNAVAILABLE;
}
