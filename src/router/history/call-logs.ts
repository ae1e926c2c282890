/**
 * A call's output, fetched through the router (shell): the history names the worker that ran the
 * call (its last placement), the live state its address, and the worker's `CallOutput` stream is
 * relayed as it comes. The caller's right to the call is checked before (a tenant reads only its
 * own calls; an operator any).
 */
import { status, type ClientReadableStream, type Metadata } from '@grpc/grpc-js';
import type { CallRecord } from '../../projections/call-history.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { CallOutputResponse } from '../../proto/gen/readie/v1/execution.js';
import { printable } from '../../shared/printable.js';
import type { WorkerConnections } from '../workers/index.js';
import { CallOutputGoneError, CallOutputUnreachableError } from './history-errors.js';

/** Where the relayed lines go: a server stream of `{lines, truncated}` messages. */
export interface OutputStream {
  write(message: CallOutputResponse): boolean;
  once(event: 'drain' | 'cancelled', listener: () => void): unknown;
  readonly cancelled: boolean;
}

/** What fetching output needs. */
export interface CallLogsDeps {
  readonly state: () => ClusterState;
  readonly connections: WorkerConnections;
  readonly workerMetadata: Metadata;
}

/** Relays calls' output from the workers that ran them. */
export class CallLogsRelay {
  constructor(private readonly deps: CallLogsDeps) {}

  /**
   * Streams `record`'s output to `out` until the worker's stream ends (with `follow`, the call's
   * end). Rejects with NOT_FOUND naming why there is none, or UNAVAILABLE when the worker that
   * keeps it cannot be reached.
   */
  async relay(record: CallRecord, follow: boolean, out: OutputStream): Promise<void> {
    const address = this.addressOf(record);
    const source = this.deps.connections
      .sessions(address.address)
      .callOutput({ requestId: record.requestId, follow }, this.deps.workerMetadata.clone());
    out.once('cancelled', () => source.cancel());
    await pipe(source, out, address.workerId, record.requestId);
  }

  /** The worker that ran the call, and its address; NOT_FOUND when there is none to ask. */
  private addressOf(record: CallRecord): { workerId: string; address: string } {
    const requestId = record.requestId;
    const last = record.attempts.at(-1);
    if (last === undefined) {
      throw new CallOutputGoneError(
        `call ${requestId} never ran on a worker (${record.state}${record.code === null ? '' : `: ${record.code}`}), so it has no output`,
      );
    }
    const worker = this.deps.state().workers.get(last.workerId);
    if (worker === undefined || worker.status === 'evicted' || worker.address === null) {
      const why =
        worker?.status === 'evicted'
          ? `was evicted (${worker.evictedReason ?? 'gone'})`
          : 'is no longer known to the router';
      throw new CallOutputGoneError(
        `worker ${last.workerId} that ran call ${requestId} ${why}: its output went with it`,
      );
    }
    return { workerId: last.workerId, address: worker.address };
  }
}

/** Relays `source` into `out`, with back-pressure; settles when `source` ends. */
function pipe(
  source: ClientReadableStream<CallOutputResponse>,
  out: OutputStream,
  workerId: string,
  requestId: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    source.on('data', (message: CallOutputResponse) => {
      if (out.cancelled) return;
      if (!out.write(message)) {
        source.pause();
        out.once('drain', () => source.resume());
      }
    });
    source.on('end', () => resolve());
    source.on('error', (error: Error & { code?: number; details?: string }) => {
      if (out.cancelled || error.code === status.CANCELLED) {
        resolve();
        return;
      }
      const details = printable(error.details ?? error.message);
      if (error.code === status.NOT_FOUND) {
        reject(new CallOutputGoneError(`worker ${workerId}: ${details}`));
      } else {
        reject(
          new CallOutputUnreachableError(
            `worker ${workerId}, which keeps the output of call ${requestId}, could not be asked: ${details}`,
          ),
        );
      }
    });
  });
}
