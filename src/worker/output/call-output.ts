/**
 * `ExecutionService.CallOutput` on the worker: a call's kept output, then (with `follow`) each new
 * line until the call ends. The router's credential alone may ask (it checks the caller's right
 * to the call before it asks).
 */
import { status, type ServerWritableStream } from '@grpc/grpc-js';
import type { CallOutputRequest, CallOutputResponse } from '../../proto/gen/readie/v1/execution.js';
import type { WorkerCredentials } from '../credentials.js';
import type { CallOutputStore, OutputNews } from './output-store.js';

/** Lines per message: a call's whole output is sent in messages of about this many lines. */
const LINES_PER_MESSAGE = 512;

/** What the RPC needs. */
export interface CallOutputDeps {
  readonly output: () => CallOutputStore | null;
  readonly credentials: Pick<WorkerCredentials, 'checkRouter'>;
}

/** Serves one `CallOutput` stream. */
export function serveCallOutput(
  stream: ServerWritableStream<CallOutputRequest, CallOutputResponse>,
  deps: CallOutputDeps,
): void {
  const fail = (code: status, details: string): void => {
    stream.emit('error', { code, details });
  };
  try {
    deps.credentials.checkRouter(stream.metadata);
  } catch (error) {
    fail(status.PERMISSION_DENIED, (error as Error).message);
    return;
  }
  const { requestId, follow } = stream.request;
  const store = deps.output();
  if (requestId === '') {
    fail(status.INVALID_ARGUMENT, 'request_id is empty');
    return;
  }
  if (!store) {
    fail(status.NOT_FOUND, 'this worker keeps no output (it has no output store)');
    return;
  }
  const kept = store.read(requestId);
  if (!('lines' in kept)) {
    fail(status.NOT_FOUND, store.absenceText(requestId, kept));
    return;
  }
  for (let i = 0; i < kept.lines.length; i += LINES_PER_MESSAGE) {
    stream.write({ lines: kept.lines.slice(i, i + LINES_PER_MESSAGE), truncated: false });
  }
  if (kept.truncated) stream.write({ lines: [], truncated: true });
  if (!follow || !kept.running) {
    stream.end();
    return;
  }
  // Read and subscribed in one tick: the writer writes synchronously, so no line falls between.
  const listener = (news: OutputNews) => {
    if (news === null) {
      stop();
      stream.end();
    } else if ('truncated' in news) stream.write({ lines: [], truncated: true });
    else stream.write({ lines: [news], truncated: false });
  };
  const stop = () => store.off(requestId, listener);
  store.on(requestId, listener);
  stream.once('cancelled', stop);
}
