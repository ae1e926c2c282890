/**
 * A shed's retry-after hint from a call's trailing metadata: `retry-after-ms`, else the standard
 * `google.rpc.RetryInfo` in `grpc-status-details-bin`.
 */
import type { Metadata } from '@grpc/grpc-js';
import { RetryInfo } from '../proto/gen/google/rpc/error_details.js';
import { Status } from '../proto/gen/google/rpc/status.js';

const RETRY_INFO = 'type.googleapis.com/google.rpc.RetryInfo';

/** The hint in ms, or undefined when the trailers carry none. */
export function retryAfterMsOf(trailers: Metadata | undefined): number | undefined {
  if (trailers === undefined) return undefined;
  const [text] = trailers.get('retry-after-ms');
  if (typeof text === 'string' && /^\d+$/.test(text)) return Number(text);
  const [details] = trailers.get('grpc-status-details-bin');
  if (!Buffer.isBuffer(details)) return undefined;
  try {
    const detail = Status.decode(details).details.find((any) => any.typeUrl === RETRY_INFO);
    if (detail === undefined) return undefined;
    const delay = RetryInfo.decode(detail.value).retryDelay;
    if (delay === undefined) return undefined;
    return delay.seconds * 1000 + Math.round(delay.nanos / 1e6);
  } catch {
    return undefined;
  }
}
