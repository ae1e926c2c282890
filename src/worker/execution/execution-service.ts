/**
 * readie.v1.ExecutionService on the worker: one Execute stream per call, and the router's word
 * that a session ended (its container is destroyed at once).
 */
import { Metadata, status, type ServerUnaryCall } from '@grpc/grpc-js';
import { NOT_STARTED } from '../../shared/call-trailers.js';
import type {
  DestroySessionContainerRequest,
  DestroySessionContainerResponse,
  ExecuteRequest,
  ExecutionServiceServer,
} from '../../proto/gen/readie/v1/execution.js';
import type { WorkerCredentials } from '../credentials.js';
import type { ContainerPool } from '../containers/index.js';
import { StatusError } from '../../shared/status-error.js';
import { InvalidCallError, WorkerUnusableError } from '../core/errors.js';
import { readHeader, type HeaderContext } from '../core/execution/call-header.js';
import type { CallTracker } from './call-tracker.js';
import { ExecuteCall, type CallDeps, type ExecuteStream } from './execute-call.js';
import { MessageReader } from './message-reader.js';
import { serveCallOutput, type CallOutputStore } from '../output/index.js';

/** What the service needs beyond a call's own dependencies. */
export interface ExecutionServiceDeps extends Omit<CallDeps, 'pool' | 'output'> {
  /** The container pool; null while the worker cannot run containers. */
  readonly pool: () => ContainerPool | null;
  /** Why the worker refuses calls (its error status), or null when it takes them. */
  readonly unusable: () => string | null;
  readonly header: HeaderContext;
  readonly calls: CallTracker;
  /** Who may call: the router's credential alone (anyone with `--auth none`). */
  readonly credentials: Pick<WorkerCredentials, 'checkRouter'>;
  /** Where calls' output is kept (null: not kept). */
  readonly output: () => CallOutputStore | null;
}

async function execute(stream: ExecuteStream, deps: ExecutionServiceDeps): Promise<void> {
  let end: (() => void) | null = null;
  try {
    deps.credentials.checkRouter(stream.metadata);
    end = deps.calls.begin();
    const pool = deps.pool();
    const unusable = deps.unusable() ?? (pool ? null : 'it has no container pool');
    if (unusable !== null || !pool) throw new WorkerUnusableError(unusable ?? '');
    const reader = new MessageReader<ExecuteRequest>(stream);
    const first = await reader.next();
    const request = readHeader(first ?? undefined, deps.header);
    await new ExecuteCall(stream, request, reader, { ...deps, pool, output: deps.output() }).run();
  } catch (error) {
    const failure = error instanceof StatusError ? error : null;
    deps.log.info(
      { code: failure?.code, error: (error as Error).message },
      'call refused before it started',
    );
    // Refused before anything ran: the client may retry it (src/shared/call-trailers.ts).
    const metadata = new Metadata();
    for (const [name, value] of Object.entries(NOT_STARTED)) metadata.set(name, value);
    stream.emit('error', {
      code: failure ? status[failure.code] : status.INTERNAL,
      details: (error as Error).message,
      metadata,
    });
  } finally {
    end?.();
  }
}

async function destroySessionContainer(
  call: ServerUnaryCall<DestroySessionContainerRequest, DestroySessionContainerResponse>,
  deps: ExecutionServiceDeps,
): Promise<DestroySessionContainerResponse> {
  deps.credentials.checkRouter(call.metadata);
  const { sessionId, containerId } = call.request;
  if (sessionId === '' || containerId === '') {
    throw new InvalidCallError('ending a session needs its session_id and container_id');
  }
  const pool = deps.pool();
  return { removed: pool ? await pool.endSession(containerId, sessionId) : false };
}

/** The service implementation to add to a gRPC server. */
export function executionService(deps: ExecutionServiceDeps): ExecutionServiceServer {
  return {
    execute: (stream) => void execute(stream, deps),
    callOutput: (stream) => serveCallOutput(stream, deps),
    destroySessionContainer: (call, callback) => {
      destroySessionContainer(call, deps).then(
        (answer) => callback(null, answer),
        (error: unknown) => {
          const failure = error instanceof StatusError ? error : null;
          callback({
            code: failure ? status[failure.code] : status.INTERNAL,
            details: (error as Error).message,
          });
        },
      );
    },
  };
}
