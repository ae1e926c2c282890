/**
 * readie.v1.ResidencyService on the worker: the router tells it which versions to keep
 * (`Protect`) and which to load ahead of calls (`Prewarm`). The router's credential alone may
 * call it (anyone with `--auth none`).
 */
import { status, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  ResidencyState,
  type PrewarmRequest,
  type PrewarmResponse,
  type ProtectRequest,
  type ProtectResponse,
  type ResidencyServiceServer,
} from '../../proto/gen/readie/v1/residency.js';
import { StatusError } from '../../shared/status-error.js';
import type { WorkerCredentials } from '../credentials.js';
import { WorkerUnusableError } from '../core/errors.js';
import type { VersionResidency } from './version-residency.js';

/** What the service needs. */
export interface ResidencyServiceDeps {
  /** The worker's versions; null while it cannot run containers. */
  readonly residency: () => VersionResidency | null;
  readonly credentials: Pick<WorkerCredentials, 'checkRouter'>;
  readonly log: Logger;
}

function answer<Req, Res>(
  deps: ResidencyServiceDeps,
  call: ServerUnaryCall<Req, Res>,
  callback: sendUnaryData<Res>,
  handle: (residency: VersionResidency, request: Req) => Res,
): void {
  try {
    deps.credentials.checkRouter(call.metadata);
    const residency = deps.residency();
    if (!residency)
      throw new WorkerUnusableError('this worker cannot hold versions: it is in error');
    callback(null, handle(residency, call.request));
  } catch (error) {
    const failure = error instanceof StatusError ? error : null;
    deps.log.info(
      { path: call.getPath(), error: (error as Error).message },
      'residency request refused',
    );
    callback({
      code: failure ? status[failure.code] : status.INTERNAL,
      details: (error as Error).message,
    });
  }
}

/** The service implementation to add to the worker's gRPC server. */
export function residencyService(deps: ResidencyServiceDeps): ResidencyServiceServer {
  return {
    protect(call: ServerUnaryCall<ProtectRequest, ProtectResponse>, callback) {
      answer(deps, call, callback, (residency, request) => {
        residency.protect(request.checkpointIds, request.seq);
        return {};
      });
    },
    prewarm(call: ServerUnaryCall<PrewarmRequest, PrewarmResponse>, callback) {
      answer(deps, call, callback, (residency, request) => {
        const state = residency.prewarm(request.checkpointId);
        deps.log.info(
          { checkpointId: request.checkpointId, state },
          'pre-warm asked by the router',
        );
        return {
          state:
            state === 'resident'
              ? ResidencyState.RESIDENCY_STATE_RESIDENT
              : ResidencyState.RESIDENCY_STATE_LOADING,
        };
      });
    },
  };
}
