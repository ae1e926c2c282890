/** Small helpers of the call flow: abortable waits, and the IDs a failed call's status carries. */
import { Metadata } from '@grpc/grpc-js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';

/** `promise`, or a rejection with the signal's reason as soon as `signal` aborts. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: Error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * The call's IDs as trailing metadata of a failed call (which may have sent no answer at all):
 * for diagnostics (grpc debugging tools, logs of a direct client) and the worker tests. The router
 * does not read them; it learns a container's fate from the worker's reports.
 */
export function idTrailers(ids: CallIds): Metadata {
  const metadata = new Metadata();
  metadata.set('readie-request-id', ids.requestId);
  metadata.set('readie-session-id', ids.sessionId);
  metadata.set('readie-worker-id', ids.workerId);
  metadata.set('readie-container-id', ids.containerId);
  metadata.set('readie-checkpoint-id', ids.checkpointId);
  if (ids.version !== '') {
    metadata.set('readie-version', ids.version);
    metadata.set('readie-routing-revision', String(ids.routingRevision));
  }
  return metadata;
}
