/** gRPC status codes between their names (as events carry them) and grpc-js numbers. */
import { status, type StatusObject } from '@grpc/grpc-js';
import { GRPC_CODE_NAMES } from '../events/index.js';
import { RouterError } from '../core/errors.js';
import type { GrpcCodeName } from '../core/placement/index.js';

/** The grpc-js number of a code name. */
export function codeNumber(name: GrpcCodeName): status {
  return status[name];
}

/** The name of a grpc-js code number (`UNKNOWN` for numbers outside the standard set). */
export function codeName(code: number): GrpcCodeName {
  return GRPC_CODE_NAMES[code] ?? 'UNKNOWN';
}

/** A status to send for an error: a `RouterError` keeps its code; anything else is `INTERNAL`. */
export function toServiceError(error: unknown): Pick<StatusObject, 'code' | 'details'> {
  if (error instanceof RouterError) return { code: codeNumber(error.code), details: error.message };
  const message = error instanceof Error ? error.message : String(error);
  return { code: status.INTERNAL, details: `internal router error: ${message}` };
}
