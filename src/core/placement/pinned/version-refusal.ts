/**
 * A pinned call refused once its version was resolved: the refusal names the resolution (version
 * and revision, in the log and to the caller), and a shed (the call could go nowhere now) also
 * says when to retry (`ROUTING_RETRY_AFTER`). Never another version.
 */
import type { Flavor } from '../../../events/schema.js';
import type { GrpcCodeName } from '../../../shared/grpc-codes.js';
import { formatDuration } from '../../../shared/units.js';
import type { RejectedDecision } from '../decision.js';
import { rejected } from '../outcome.js';
import type { Placing } from '../placing.js';
import type { Resolution } from './resolution.js';
import { explainRouting, routingCandidates } from './explain-routing.js';

/** The call is refused after resolving `resolution` (no retry hint). */
export function refuseVersion(
  placing: Placing,
  resolution: Resolution,
  code: GrpcCodeName,
  message: string,
): RejectedDecision {
  explainRouting(placing, resolution, `refused: ${message}`);
  const routing = {
    version: resolution.version,
    routingRevision: resolution.revision,
    retryAfterMs: null,
  };
  return rejected(placing.call, placing.before, code, message, routing);
}

/**
 * The call is shed: `RESOURCE_EXHAUSTED` because of `why`, with the retry-after hint; explained
 * with every candidate of the version's `flavor` and its `subset`.
 */
export function shed(
  placing: Placing,
  resolution: Resolution,
  why: string,
  flavor: Flavor,
  subset: readonly string[],
): RejectedDecision {
  const retryAfterMs = placing.config.ROUTING_RETRY_AFTER;
  const message = `${why}: retry in ${formatDuration(retryAfterMs)} (ROUTING_RETRY_AFTER)`;
  if (placing.explain !== undefined) {
    const candidates = routingCandidates(placing, resolution, flavor, subset);
    explainRouting(placing, resolution, `shed: ${message}`, flavor, candidates);
  }
  const routing = {
    version: resolution.version,
    routingRevision: resolution.revision,
    retryAfterMs,
  };
  return rejected(placing.call, placing.before, 'RESOURCE_EXHAUSTED', message, routing);
}
