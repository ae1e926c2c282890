/**
 * Rule 0: the call itself, before anything of the cluster is asked (docs/placement.md): its
 * request ID must not be another tenant's, its packages must be requirements, and it must not
 * contradict itself; a pinned call needs a tenant and a checkpoint (docs/tenant-routing.md); a
 * retry must name its own tenant's call. So a malformed call is refused the same way whatever
 * the cluster looks like.
 */
import type { PlacementDecision } from './decision.js';
import { checkPackages } from './packages.js';
import type { Placing } from './placing.js';
import { refuse, rejected } from './outcome.js';
import { foreignRequest, requestInUseMessage } from './request-owner.js';
import { retryProblem } from './retry-check.js';

/**
 * The refusal of a call that is not valid on its own, or null (its packages, parsed, are then in
 * `placing.requirements`).
 */
export function validate(placing: Placing): PlacementDecision | null {
  const { state, call, explain } = placing;
  const { demand } = call;
  // The request ID: another tenant's, while the router remembers it, is not this call's to use.
  const foreign = foreignRequest(state, call);
  if (foreign !== null) {
    const message = requestInUseMessage(call.requestId);
    return rejected(call, [], 'ALREADY_EXISTS', message, undefined, foreign);
  }

  // The demand itself: valid packages, no contradiction.
  const checked = checkPackages(demand.packages, placing.caches?.requirements);
  if (!checked.ok) {
    const message = `package entry "${checked.entry}" is not a valid PEP 508 requirement: ${checked.problem}`;
    explain?.packages({ requested: demand.packages ?? [], problem: message });
    return rejected(call, [], 'INVALID_ARGUMENT', message);
  }
  explain?.packages({ requested: demand.packages ?? [], duplicates: checked.duplicates });
  placing.requirements = checked.requirements;
  const checkpoint = demand.checkpointId ?? '';
  if (checkpoint !== '' && demand.disableOptimizedExecution === true) {
    return rejected(
      call,
      [],
      'INVALID_ARGUMENT',
      `checkpoint_id "${checkpoint}" and disable_optimized_execution contradict each other`,
    );
  }

  // A tenant's pinned version: the tenant is the caller's, and a version is a checkpoint.
  if (placing.pinned) {
    if (placing.tenantId === null) {
      return refuse(
        placing,
        'FAILED_PRECONDITION',
        "a pinned call needs a tenant, and this call's credential names none (use a tenant's client token)",
      );
    }
    if (demand.disableOptimizedExecution === true) {
      return refuse(
        placing,
        'INVALID_ARGUMENT',
        'a pinned call runs on its version, a checkpoint: disable_optimized_execution contradicts pinned',
      );
    }
  }
  const retry = retryProblem(state, call);
  return retry === null ? null : refuse(placing, 'PERMISSION_DENIED', retry);
}
