/**
 * Rule 7 and every refusal: the two outcomes a placement records, built in one place for every
 * step that decides one: `CallRejected`, and `CallPlaced` with the reservation (and the session's
 * pin when a session's container is reused and, from rules 11, the pin changes).
 */
import type { NewEvent } from '../../events/types.js';
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { sessionIdOf, type CallToPlace } from './call.js';
import { flavorCatalogue } from './checkpoints.js';
import type { ForeignId, PlacementDecision, RejectedDecision } from './decision.js';
import { planPackages } from './packages.js';
import { explainRouting } from './pinned/explain-routing.js';
import type { Placing } from './placing.js';
import { rulesSteps } from './rules-version.js';

/** What a refusal of a pinned call after its resolution records (all null otherwise). */
export interface RejectionRouting {
  readonly version: string | null;
  readonly routingRevision: number | null;
  readonly retryAfterMs: number | null;
}

/** What a placement of a pinned call records (null, null, false otherwise). */
export interface PlacementRouting {
  readonly version: string | null;
  readonly routingRevision: number | null;
  readonly coldLoad: boolean;
}

/** Where on the chosen worker the call runs. */
export interface Where {
  /** The session's container it reuses; null for a new container. */
  readonly containerId: string | null;
  /** The checkpoint of the new container (or the reused one's); null for a cold start. */
  readonly checkpointId: string | null;
}

const NOT_ROUTED_REJECTION: RejectionRouting = {
  version: null,
  routingRevision: null,
  retryAfterMs: null,
};
const NOT_ROUTED_PLACEMENT: PlacementRouting = {
  version: null,
  routingRevision: null,
  coldLoad: false,
};

/**
 * The call is refused: `CallRejected` after `before` (a dropped pin's `SessionUnpinned`);
 * `foreign` when it named another tenant's ID (for the router's log only).
 */
export function rejected(
  call: CallToPlace,
  before: readonly NewEvent[],
  code: GrpcCodeName,
  message: string,
  routing: RejectionRouting = NOT_ROUTED_REJECTION,
  foreign?: ForeignId,
): RejectedDecision {
  return {
    outcome: 'rejected',
    code,
    message,
    ...routing,
    ...(foreign === undefined ? {} : { foreign }),
    events: [
      ...before,
      {
        type: 'CallRejected',
        requestId: call.requestId,
        sessionId: sessionIdOf(call.sessionId),
        code,
        message,
        ...routing,
      },
    ],
  };
}

/**
 * The call is refused before a pinned call's version was resolved (a pinned call's explanation
 * says so in its routing part); `foreign` when it named another tenant's ID.
 */
export function refuse(
  placing: Placing,
  code: GrpcCodeName,
  message: string,
  foreign?: ForeignId,
): PlacementDecision {
  if (placing.pinned) explainRouting(placing, null, `refused: ${message}`);
  return rejected(placing.call, placing.before, code, message, NOT_ROUTED_REJECTION, foreign);
}

/** Rules 6 and 7: the packages for `worker`'s base image, and the reservation events. */
export function reserve(
  placing: Placing,
  worker: WorkerRecord,
  where: Where,
  routing: PlacementRouting = NOT_ROUTED_PLACEMENT,
): PlacementDecision {
  const { call, budget, explain } = placing;
  const base = flavorCatalogue(placing.state.catalogue, worker.flavor)?.basePackages ?? null;
  const plan = planPackages(placing.requirements, base);
  explain?.packages({ kept: plan.packages, skipped: plan.skippedPackages });
  const sessionId = placing.sessionId;
  const events: NewEvent[] = [
    ...placing.before,
    {
      type: 'CallPlaced',
      requestId: call.requestId,
      sessionId,
      workerId: worker.workerId,
      containerId: where.containerId,
      checkpointId: where.checkpointId,
      packages: [...plan.packages],
      skippedPackages: [...plan.skippedPackages],
      memory: budget.memory,
      ...routing,
    },
  ];
  if (sessionId !== null && where.containerId !== null && !pinHolds(placing, worker, where)) {
    events.push({
      type: 'SessionPinned',
      sessionId,
      workerId: worker.workerId,
      containerId: where.containerId,
      requestId: call.requestId,
      checkpointId: where.checkpointId,
    });
  }
  return {
    outcome: 'placed',
    events,
    workerId: worker.workerId,
    containerId: where.containerId,
    checkpointId: where.checkpointId,
    packages: plan.packages,
    skippedPackages: plan.skippedPackages,
    memory: budget.memory,
    ...routing,
  };
}

/**
 * Whether the call's session is pinned to `where` on `worker` already, so that a `SessionPinned`
 * naming it would change nothing the fold keeps (its checkpoint too: none named, or the same).
 * Under rules 10 and earlier it never does: every reuse appended one.
 */
function pinHolds(placing: Placing, worker: WorkerRecord, where: Where): boolean {
  if (!rulesSteps(placing.state.rulesVersion).pinsSessionOnce) return false;
  const pin = placing.state.sessions.get(placing.sessionId ?? '')?.pin;
  return (
    pin !== undefined &&
    pin !== null &&
    pin.workerId === worker.workerId &&
    pin.containerId === where.containerId &&
    (where.checkpointId === null || where.checkpointId === pin.checkpointId)
  );
}
