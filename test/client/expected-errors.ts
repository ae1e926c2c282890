/** Every gRPC status but OK and the client error class a call ending with it rejects with. */
import { status as Status } from '@grpc/grpc-js';
import {
  AuthenticationError,
  CallCancelledError,
  ClusterUnavailableError,
  ConflictError,
  InternalServerError,
  InvalidRequestError,
  PermissionDeniedError,
  PreconditionError,
  ResourceExhaustedError,
  RemoteTimeoutError,
  SessionExpiredError,
  UnsupportedError,
  type ReadieError,
} from '../../src/client/index.js';

type ErrorClass = abstract new (...args: never[]) => ReadieError;

export const EXPECTED_ERRORS: ReadonlyMap<Status, ErrorClass> = new Map<Status, ErrorClass>([
  [Status.CANCELLED, CallCancelledError],
  [Status.UNKNOWN, InternalServerError],
  [Status.INVALID_ARGUMENT, InvalidRequestError],
  [Status.DEADLINE_EXCEEDED, RemoteTimeoutError],
  [Status.NOT_FOUND, SessionExpiredError],
  [Status.ALREADY_EXISTS, ConflictError],
  [Status.PERMISSION_DENIED, PermissionDeniedError],
  [Status.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [Status.FAILED_PRECONDITION, PreconditionError],
  [Status.ABORTED, ConflictError],
  [Status.OUT_OF_RANGE, InvalidRequestError],
  [Status.UNIMPLEMENTED, UnsupportedError],
  [Status.INTERNAL, InternalServerError],
  [Status.UNAVAILABLE, ClusterUnavailableError],
  [Status.DATA_LOSS, InternalServerError],
  [Status.UNAUTHENTICATED, AuthenticationError],
]);
