/** A retry may only name its own tenant's call (`CallRequested.retryOf`). */
import type { ClusterState } from '../../projections/cluster-state.js';
import type { CallToPlace } from './call.js';

/**
 * Why `call` may not name the call it says it retries, or null when it may: the retried call is
 * another tenant's (or a tenant's, and this call has none). A call the router does not remember
 * (never seen, untenanted, or older than `PIN_RETENTION`) may be named: nothing of it is reused.
 */
export function retryProblem(state: ClusterState, call: CallToPlace): string | null {
  const retryOf = call.retryOf ?? null;
  if (retryOf === null || retryOf === '') return null;
  const retried = state.routing.calls.get(retryOf);
  if (retried === undefined || retried.tenantId === (call.tenantId ?? null)) return null;
  return `retry_of names request ${retryOf}, which is not this tenant's call: a call may only retry its own tenant's calls`;
}
