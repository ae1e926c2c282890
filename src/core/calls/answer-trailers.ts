/**
 * The trailing metadata every answer of the router ends with (OK, error or shed): the call's IDs,
 * and for a pinned call its version and routing revision; for a shed also the retry-after hint,
 * as `retry-after-ms` and as the standard `google.rpc.RetryInfo` in `grpc-status-details-bin`.
 * Plain entries, so both transports (grpc-js and node:http2) write them the same way.
 */
import { Any } from '../../proto/gen/google/protobuf/any.js';
import { RetryInfo } from '../../proto/gen/google/rpc/error_details.js';
import { Status } from '../../proto/gen/google/rpc/status.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import { NO_TRAILERS, type CallTrailers } from '../../shared/call-trailers.js';
import { grpcCodeNumber, type GrpcCodeName } from '../../shared/grpc-codes.js';

/** One trailing metadata entry: text, or bytes for a `-bin` key. */
export interface TrailerEntry {
  readonly key: string;
  readonly value: string | Uint8Array;
}

/** What a shed adds: the status it ends with and when to retry. */
export interface ShedTrailer {
  readonly code: GrpcCodeName;
  readonly message: string;
  readonly retryAfterMs: number;
}

/** The type URL of `google.rpc.RetryInfo` in a status's details. */
export const RETRY_INFO_TYPE_URL = 'type.googleapis.com/google.rpc.RetryInfo';

/** The `grpc-status-details-bin` value of a shed: a `google.rpc.Status` with a `RetryInfo`. */
export function retryStatusDetails(shed: ShedTrailer): Uint8Array {
  const retry = RetryInfo.encode({
    retryDelay: {
      seconds: Math.floor(shed.retryAfterMs / 1000),
      nanos: (shed.retryAfterMs % 1000) * 1_000_000,
    },
  }).finish();
  return Status.encode({
    code: grpcCodeNumber(shed.code),
    message: shed.message,
    details: [Any.fromPartial({ typeUrl: RETRY_INFO_TYPE_URL, value: Buffer.from(retry) })],
  }).finish();
}

/** Adds `key: value` to `entries` unless the value is missing or empty. */
function text(entries: TrailerEntry[], key: string, value: string | undefined): void {
  if (value !== undefined && value !== '') entries.push({ key, value });
}

/** `trailers` (what readie says about the function: src/shared/call-trailers.ts) as entries. */
export function trailerEntries(trailers: CallTrailers): TrailerEntry[] {
  return Object.entries(trailers).map(([key, value]) => ({ key, value }));
}

/**
 * The trailers of an answer with `ids` (the placed or resolved ones), a shed's hint, and what
 * readie says about the function (`readie-not-started`, a relayed `readie-killed`, ...).
 */
export function answerTrailers(
  ids: Partial<CallIds>,
  shed?: ShedTrailer,
  about: CallTrailers = NO_TRAILERS,
): TrailerEntry[] {
  const entries: TrailerEntry[] = [];
  text(entries, 'readie-request-id', ids.requestId);
  text(entries, 'readie-session-id', ids.sessionId);
  text(entries, 'readie-worker-id', ids.workerId);
  text(entries, 'readie-container-id', ids.containerId);
  text(entries, 'readie-checkpoint-id', ids.checkpointId);
  text(entries, 'readie-version', ids.version);
  if (ids.routingRevision !== undefined && ids.routingRevision > 0) {
    text(entries, 'readie-routing-revision', String(ids.routingRevision));
  }
  if (shed !== undefined) {
    entries.push({ key: 'retry-after-ms', value: String(shed.retryAfterMs) });
    entries.push({ key: 'grpc-status-details-bin', value: retryStatusDetails(shed) });
  }
  entries.push(...trailerEntries(about));
  return entries;
}
