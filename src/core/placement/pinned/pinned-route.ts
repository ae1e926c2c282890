/**
 * A tenant's pinned call after session affinity (docs/tenant-routing.md): resolved once (its
 * session's, its retried call's, or its tenant's entry in force), never served by another
 * version. A session's container must already hold the version; else the version's subset are
 * the candidates, its holders come first, and the best member that passes the filters loads it.
 */
import type { SessionPin, WorkerRecord } from '../../../projections/cluster-state.js';
import type { Route } from '../route.js';
import type { Placing } from '../placing.js';
import { refuse, reserve } from '../outcome.js';
import type { PlacementDecision } from '../decision.js';
import { scanSubset, type SubsetScan } from './holders.js';
import { resolvePinned, type Resolution } from './resolution.js';
import { explainRouting } from './explain-routing.js';
import { versionCandidates, type VersionCandidates } from './subset.js';
import { loadVersion, noMember } from './version-load.js';
import { refuseVersion } from './version-refusal.js';

/**
 * The route of a pinned call resolved to `resolution`. A class, not an object of closures: one is
 * made for every pinned call, and its methods are shared.
 */
class PinnedRoute implements Route<VersionCandidates, SubsetScan> {
  constructor(private readonly resolution: Resolution) {}

  reuse(placing: Placing, worker: WorkerRecord, pin: SessionPin): PlacementDecision {
    const { resolution } = this;
    const { version } = resolution;
    if (pin.checkpointId !== version) {
      const held = pin.checkpointId === null ? 'a cold start' : `checkpoint "${pin.checkpointId}"`;
      return refuseVersion(
        placing,
        resolution,
        'FAILED_PRECONDITION',
        `session ${placing.sessionId ?? ''} runs in a container of ${held}, not version "${version}": start a new session for pinned calls`,
      );
    }
    explainRouting(
      placing,
      resolution,
      `reuses the session's container ${pin.workerId}/${pin.containerId}, which holds version "${version}"`,
    );
    return reserve(
      placing,
      worker,
      { containerId: pin.containerId, checkpointId: version },
      { version, routingRevision: resolution.revision, coldLoad: false },
    );
  }

  candidates(placing: Placing): VersionCandidates | PlacementDecision {
    const found = versionCandidates(placing, this.resolution);
    return 'message' in found
      ? refuseVersion(placing, this.resolution, 'FAILED_PRECONDITION', found.message)
      : found;
  }

  scan(placing: Placing, candidates: VersionCandidates): SubsetScan {
    return scanSubset(placing, this.resolution.version, candidates);
  }

  unplaced(placing: Placing, scan: SubsetScan): PlacementDecision {
    return noMember(placing, this.resolution, scan);
  }

  place(placing: Placing, scan: SubsetScan, worker: WorkerRecord): PlacementDecision {
    return loadVersion(placing, this.resolution, scan, worker);
  }
}

/**
 * A pinned call's route once its version is resolved, or its refusal: no resolution (no pin),
 * or a checkpoint the call names that is not its version.
 */
export function pinnedRoute(
  placing: Placing,
): Route<VersionCandidates, SubsetScan> | PlacementDecision {
  const { state, call } = placing;
  // Validation refused a pinned call without a tenant.
  const tenantId = placing.tenantId as string;
  const resolved = resolvePinned(state, call, tenantId, placing.unreachable.length > 0);
  if (!resolved.ok) return refuse(placing, resolved.code, resolved.message);
  const { resolution } = resolved;
  const named = call.demand.checkpointId ?? '';
  if (named !== '' && named !== resolution.version) {
    return refuseVersion(
      placing,
      resolution,
      'FAILED_PRECONDITION',
      `the call names checkpoint "${named}" but tenant ${tenantId}'s pinned version is "${resolution.version}": a pinned call is only ever served by its version`,
    );
  }
  return new PinnedRoute(resolution);
}
