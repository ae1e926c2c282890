/** The router's admin surface: the operator's `AdminService` and the tenants' `TenantService`. */
export { adminService, type AdminServiceOptions } from './admin-service.js';
export { sessionState, statusOf, workerView, type LiveCounts } from './status-view.js';
export {
  RECENT_FAILURES_KEPT,
  WorkerFailures,
  type WorkerFailureRecord,
} from './worker-failures.js';
export { tenantService, type TenantServiceOptions } from './tenant-service.js';
