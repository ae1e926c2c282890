/**
 * `TenantService` (shell): what a tenant may ask about itself (its usable slots, its calls waiting
 * in the admission queue, its images), and the end of
 * one of its sessions. The tenant is the one its credential names; no request carries a tenant ID,
 * so a tenant cannot ask about another.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import type {
  EndSessionRequest,
  EndSessionResponse,
  OwnQueueRequest,
  OwnQueueResponse,
  SlotsRequest,
  SlotsResponse,
  TenantServiceServer,
} from '../../proto/gen/readie/v1/tenant.js';
import { toServiceError } from '../grpc-status.js';
import { budgetOf, usableSlots } from '../../core/placement/index.js';
import { pinnedSubset } from '../../core/placement/index.js';
import { SlotsRefusedError } from '../../core/errors.js';
import { tenantOf, type RouterCredentials } from '../security/index.js';
import { endSession, type SessionEndDeps } from '../sessions/index.js';
import { tenantHistoryHandlers, type HistoryHandlerOptions } from '../history/index.js';
import { tenantImageHandlers, type ImageHandlerOptions } from '../images/index.js';
import { quotaOf } from '../../projections/quota-state.js';
import { othersWaiting, ownQueue, queueTimeoutMs } from './queue-view.js';

/** What the tenant service reads, and what ending a session needs. */
export interface TenantServiceOptions {
  readonly state: () => ClusterState;
  readonly credentials: RouterCredentials;
  readonly sessions: SessionEndDeps;
  /** The call history and the relay of calls' output. */
  readonly history: Omit<HistoryHandlerOptions, 'credentials' | 'clock'>;
  /** Asking the workers about the tenant's images. */
  readonly images: Omit<ImageHandlerOptions, 'credentials' | 'logger'>;
}

/** The workers a tenant's slots are counted on: all of them, or its pinned version's subset. */
function countedWorkers(
  state: ClusterState,
  tenantId: string | null,
  pinned: boolean,
  gpuCall: boolean,
): Iterable<WorkerRecord> {
  if (!pinned) return state.workers.values();
  if (tenantId === null) {
    throw new SlotsRefusedError(
      'FAILED_PRECONDITION',
      "slots for pinned calls need a tenant, and this credential names none (use a tenant's client token)",
    );
  }
  const subset = pinnedSubset(state, tenantId, gpuCall);
  if (!subset.ok) throw new SlotsRefusedError(subset.code, subset.message);
  return subset.workerIds.flatMap((workerId) => state.workers.get(workerId) ?? []);
}

/** The `TenantService` implementation. */
export function tenantService(options: TenantServiceOptions): TenantServiceServer {
  const { credentials } = options;
  return {
    ...tenantHistoryHandlers({
      ...options.history,
      credentials,
      clock: options.sessions.clock,
    }),
    ...tenantImageHandlers({ ...options.images, credentials, logger: options.sessions.logger }),
    slots(
      call: ServerUnaryCall<SlotsRequest, SlotsResponse>,
      callback: sendUnaryData<SlotsResponse>,
    ) {
      try {
        const principal = credentials.authorize(call.metadata, call.getPath());
        const state = options.state();
        const { memory, gpuMemory, gpu, pinned } = call.request;
        const tenantId = tenantOf(principal) ?? null;
        const budget = budgetOf(
          {
            memory: memory ?? null,
            gpuMemory: gpuMemory === 0 ? null : gpuMemory,
            gpu,
            disableOptimizedExecution: null,
            checkpointId: null,
            imports: null,
            packages: null,
            pinned: pinned ? true : null,
          },
          state.config,
        );
        const count = usableSlots(
          countedWorkers(state, tenantId, pinned, budget.gpuCall),
          budget,
          state.config,
        );
        callback(null, {
          tenantId: tenantId ?? '',
          slots: count.slots,
          memory: budget.memory,
          workers: count.workers,
          queueTimeoutMs: queueTimeoutMs(state),
          maxQueued: queueTimeoutMs(state) > 0 ? quotaOf(state.quotas, tenantId).maxQueued : 0,
          othersWaiting: othersWaiting(state, tenantId),
        });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    ownQueue(
      call: ServerUnaryCall<OwnQueueRequest, OwnQueueResponse>,
      callback: sendUnaryData<OwnQueueResponse>,
    ) {
      try {
        const tenantId = tenantOf(credentials.authorize(call.metadata, call.getPath())) ?? null;
        callback(null, ownQueue(options.state(), tenantId, call.request.requestId));
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    endSession(
      call: ServerUnaryCall<EndSessionRequest, EndSessionResponse>,
      callback: sendUnaryData<EndSessionResponse>,
    ) {
      let tenantId: string | null;
      try {
        tenantId = tenantOf(credentials.authorize(call.metadata, call.getPath())) ?? null;
      } catch (error) {
        callback(toServiceError(error));
        return;
      }
      const left = new AbortController();
      call.once('cancelled', () => left.abort());
      endSession(options.sessions, call.request.sessionId, tenantId, left.signal).then(
        (answer) => callback(null, answer),
        (error: unknown) => callback(toServiceError(error)),
      );
    },
  };
}
