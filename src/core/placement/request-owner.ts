/**
 * A request ID is its first tenant's for as long as the router remembers it (the tenant calls
 * kept for their retries, `PIN_RETENTION`): another tenant's call reusing it, or one without a
 * tenant, is refused with the words of any request ID already in use, so it learns nothing of
 * whose it is; the owner's own calls may reuse and retry it as before.
 */
import type { ClusterState } from '../../projections/cluster-state.js';
import type { CallToPlace } from './call.js';
import type { ForeignId } from './decision.js';
import { rulesSteps } from './rules-version.js';

/**
 * The refusal of a request ID already in use: in flight on this router, or another tenant's call
 * the router remembers. The same words for both, so a caller never learns whose ID it reused.
 */
export function requestInUseMessage(requestId: string): string {
  return `request ${requestId} is already in use: every call needs its own request ID`;
}

/** The request ID `call` reuses when another tenant owns it, else null. */
export function foreignRequest(state: ClusterState, call: CallToPlace): ForeignId | null {
  // Rules before 4 (a log recorded then): a reused request ID was taken over.
  if (!rulesSteps(state.rulesVersion).owners) return null;
  const owner = state.routing.calls.get(call.requestId);
  if (owner === undefined || owner.tenantId === (call.tenantId ?? null)) return null;
  return { kind: 'request', id: call.requestId, ownerTenantId: owner.tenantId };
}
