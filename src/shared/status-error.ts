/**
 * The one error type of the router and the worker: a failure that ends a call (or refuses a
 * request) with a gRPC status, named as events name it, and a message an operator, or the user
 * reading their client's exception, can act on. Shells turn the name into the transport's number.
 */
import type { GrpcCodeName } from './grpc-codes.js';

/** An error reported with a gRPC status code. */
export abstract class StatusError extends Error {
  /** The gRPC status code name the caller receives. */
  abstract readonly code: GrpcCodeName;
}
