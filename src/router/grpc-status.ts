/** gRPC status codes between their names (as events and errors carry them) and grpc-js numbers. */
import { status, type StatusObject } from '@grpc/grpc-js';
import { grpcCodeName, type GrpcCodeName } from '../shared/grpc-codes.js';
import { statusOf } from '../core/errors.js';

/** The grpc-js number of a code name. */
export function codeNumber(name: GrpcCodeName): status {
  return status[name];
}

/** The name of a grpc-js code number (`UNKNOWN` for numbers outside the standard set). */
export function codeName(code: number): GrpcCodeName {
  return grpcCodeName(code);
}

/** A status to send for an error: a `StatusError` keeps its code; anything else is `INTERNAL`. */
export function toServiceError(error: unknown): Pick<StatusObject, 'code' | 'details'> {
  const { code, details } = statusOf(error);
  return { code: codeNumber(code), details };
}
