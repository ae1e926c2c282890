/**
 * `TenantService` (shell): what a tenant may ask about itself. The tenant is the one its
 * credential names; no request carries a tenant ID, so a tenant cannot ask about another.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type {
  SlotsRequest,
  SlotsResponse,
  TenantServiceServer,
} from '../../proto/gen/readie/v1/tenant.js';
import { toServiceError } from '../grpc-status.js';
import { budgetOf } from '../../core/placement/index.js';
import { tenantOf, type RouterCredentials } from '../security/index.js';
import { usableSlots } from './slots.js';

/** What the tenant service reads. */
export interface TenantServiceOptions {
  readonly state: () => ClusterState;
  readonly credentials: RouterCredentials;
}

/** The `TenantService` implementation. */
export function tenantService(options: TenantServiceOptions): TenantServiceServer {
  const { credentials } = options;
  return {
    slots(
      call: ServerUnaryCall<SlotsRequest, SlotsResponse>,
      callback: sendUnaryData<SlotsResponse>,
    ) {
      try {
        const principal = credentials.authorize(call.metadata, call.getPath());
        const state = options.state();
        const { memory, gpuMemory, gpu } = call.request;
        const budget = budgetOf(
          {
            memory: memory ?? null,
            gpuMemory: gpuMemory === 0 ? null : gpuMemory,
            gpu,
            disableOptimizedExecution: null,
            checkpointId: null,
            imports: null,
            packages: null,
            pinned: null,
          },
          state.config,
        );
        const count = usableSlots(state.workers.values(), budget, state.config);
        callback(null, {
          tenantId: tenantOf(principal) ?? '',
          slots: count.slots,
          memory: budget.memory,
          workers: count.workers,
        });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
  };
}
