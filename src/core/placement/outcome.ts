/**
 * The two outcomes a placement records, built in one place for every rule that decides one (the
 * seed rules and a pinned call's routing): `CallRejected`, and `CallPlaced` with the reservation
 * (and the session's pin when a session's container is reused).
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { sessionIdOf, type Budget, type CallToPlace } from './call.js';
import { flavorCatalogue } from './checkpoints.js';
import type { ForeignId, PlacementDecision } from './decision.js';
import type { ExplanationBuilder } from './explanation.js';
import { planPackages, type PackageRequirement } from './packages.js';

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
): PlacementDecision {
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

/** Rules 6 and 7: the packages for `worker`'s base image, and the reservation events. */
export function reserve(
  call: CallToPlace,
  before: readonly NewEvent[],
  budget: Budget,
  worker: WorkerRecord,
  requirements: readonly PackageRequirement[],
  state: ClusterState,
  where: { containerId: string | null; checkpointId: string | null },
  explain?: ExplanationBuilder,
  routing: PlacementRouting = NOT_ROUTED_PLACEMENT,
): PlacementDecision {
  const base = flavorCatalogue(state.catalogue, worker.flavor)?.basePackages ?? null;
  const plan = planPackages(requirements, base);
  explain?.packages({ kept: plan.packages, skipped: plan.skippedPackages });
  const sessionId = sessionIdOf(call.sessionId);
  const events: NewEvent[] = [
    ...before,
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
  if (sessionId !== null && where.containerId !== null) {
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
