/**
 * gRPC status codes by name: how events (`CallRejected.code`, `CallFinished.code`) and every
 * readie error carry them. The numbers are the names' positions; shells that talk grpc-js (or
 * any transport) turn a name into its number here and nowhere else.
 */

/** gRPC status code names, in the order of their numbers (`OK` is 0, `UNAUTHENTICATED` 16). */
export const GRPC_CODE_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

/** A gRPC status code name, as events and errors carry it. */
export type GrpcCodeName = (typeof GRPC_CODE_NAMES)[number];

/** The name of a status code number (`UNKNOWN` for numbers outside the standard set). */
export function grpcCodeName(code: number): GrpcCodeName {
  return GRPC_CODE_NAMES[code] ?? 'UNKNOWN';
}

/** The number of a status code name. */
export function grpcCodeNumber(name: GrpcCodeName): number {
  return GRPC_CODE_NAMES.indexOf(name);
}
