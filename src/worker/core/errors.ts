/**
 * The worker's errors: each is a `StatusError` (the router's and the worker's one error type),
 * carrying the gRPC status code name the call ends with and a message an operator (or the user
 * reading their client's exception) can act on. Pure: the service maps names to grpc-js numbers.
 */
import { StatusError } from '../../shared/status-error.js';

/** The router's stream is malformed (no header first, an oversized chunk, a bad requirement). */
export class InvalidCallError extends StatusError {
  override readonly name = 'InvalidCallError';
  readonly code = 'INVALID_ARGUMENT';
}

/** The client's Python major.minor differs from the sandbox's; nothing ran. */
export class PythonVersionMismatchError extends StatusError {
  override readonly name = 'PythonVersionMismatchError';
  readonly code = 'FAILED_PRECONDITION';
}

/** The call was placed on another worker than this one. */
export class WrongWorkerError extends StatusError {
  override readonly name = 'WrongWorkerError';
  readonly code = 'FAILED_PRECONDITION';
}

/** The requested packages did not install; the container stays usable. */
export class PackageInstallError extends StatusError {
  override readonly name = 'PackageInstallError';
  readonly code = 'FAILED_PRECONDITION';
}

/** No container could be created (at the container limit, or the sandbox failed to start). */
export class ContainerUnavailableError extends StatusError {
  override readonly name = 'ContainerUnavailableError';
  readonly code = 'RESOURCE_EXHAUSTED';
}

/** The router named a container this worker does not hold (destroyed, or never created here). */
export class ContainerNotFoundError extends StatusError {
  override readonly name = 'ContainerNotFoundError';
  readonly code = 'NOT_FOUND';
}

/** The router named a container of another session: no session resumes another's container. */
export class ContainerOwnedError extends StatusError {
  override readonly name = 'ContainerOwnedError';
  readonly code = 'PERMISSION_DENIED';
}

/** The router named a container that is running another call. */
export class ContainerBusyError extends StatusError {
  override readonly name = 'ContainerBusyError';
  readonly code = 'RESOURCE_EXHAUSTED';
}

/** The executor never answered: it did not accept a connection, or the call outlived its time. */
export class ExecutorTimeoutError extends StatusError {
  override readonly name = 'ExecutorTimeoutError';
  readonly code = 'DEADLINE_EXCEEDED';
}

/** The executor went away mid-call (out of memory, a crash, an exit) or broke the protocol. */
export class ExecutorLostError extends StatusError {
  override readonly name = 'ExecutorLostError';
  readonly code = 'UNAVAILABLE';
}

/**
 * The call's function ran and was killed for exceeding its memory budget (the container's memory
 * limit): `RESOURCE_EXHAUSTED`, with trailers that say so and the budget (src/shared/call-trailers.ts).
 */
export class OutOfMemoryError extends StatusError {
  override readonly name = 'OutOfMemoryError';
  readonly code = 'RESOURCE_EXHAUSTED';

  constructor(
    message: string,
    /** The budget it exceeded, in bytes. */
    readonly budget: number,
  ) {
    super(message);
  }
}

/** The worker is leaving and takes no new calls. */
export class ShuttingDownError extends StatusError {
  override readonly name = 'ShuttingDownError';
  readonly code = 'UNAVAILABLE';
}

/** The caller did not present the router's credential (none, or one this worker does not know). */
export class UnauthenticatedError extends StatusError {
  override readonly name = 'UnauthenticatedError';
  readonly code = 'UNAUTHENTICATED';
}

/** The caller presented a credential this worker knows but that is not the router's (its own). */
export class NotTheRouterError extends StatusError {
  override readonly name = 'NotTheRouterError';
  readonly code = 'PERMISSION_DENIED';
}

/** The worker cannot start: a bad flag, no Python, no cgroups. Not a call's error. */
export class WorkerStartupError extends Error {
  override readonly name = 'WorkerStartupError';
}

/** The worker was told to stop (SIGTERM) before it had started: it undid what it had begun. */
export class WorkerStartAbandoned extends Error {
  override readonly name = 'WorkerStartAbandoned';
}

/** The worker is in error status (no Python, no cgroups, a sandbox that does not start). */
export class WorkerUnusableError extends StatusError {
  override readonly name = 'WorkerUnusableError';
  readonly code = 'UNAVAILABLE';
}

/** A pinned call's version could not be loaded here; the message names it and why. */
export class VersionLoadError extends StatusError {
  override readonly name = 'VersionLoadError';
  readonly code = 'FAILED_PRECONDITION';
}

/** A version this worker's catalogue does not list (a pre-warm or a pinned call naming it). */
export class UnknownVersionError extends StatusError {
  override readonly name = 'UnknownVersionError';
  readonly code = 'NOT_FOUND';
}

/** A container that does not hold the version a pinned call needs (never served from). */
export class VersionMismatchError extends StatusError {
  override readonly name = 'VersionMismatchError';
  readonly code = 'FAILED_PRECONDITION';
}

/**
 * An image could not be built: a requirement did not resolve to wheels, the install failed, or a
 * listed module did not import (the message names it, with its traceback). Nothing of the image
 * is kept; the next call for it builds again.
 */
export class ImageBuildError extends StatusError {
  override readonly name = 'ImageBuildError';
  readonly code = 'FAILED_PRECONDITION';
}

/** An image is larger than the worker's whole image cache (--image-cache-size): never kept. */
export class ImageTooLargeError extends StatusError {
  override readonly name = 'ImageTooLargeError';
  readonly code = 'FAILED_PRECONDITION';
}

/** An image removal names no image this worker holds for the tenant. */
export class ImageNotFoundError extends StatusError {
  override readonly name = 'ImageNotFoundError';
  readonly code = 'NOT_FOUND';
}

/** An image is named badly: not hex, too short a prefix, or a prefix of several images. */
export class ImageNameError extends StatusError {
  override readonly name = 'ImageNameError';
  readonly code = 'INVALID_ARGUMENT';
}

/** An image cannot be removed while a call uses it. */
export class ImageInUseError extends StatusError {
  override readonly name = 'ImageInUseError';
  readonly code = 'FAILED_PRECONDITION';
}
