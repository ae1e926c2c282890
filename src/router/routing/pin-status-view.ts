/**
 * The admin service's `PinStatus` answer (docs/tenant-routing.md), read from the folded state and
 * the time: the table with each entry's subset and calls in flight per version, staged pins and
 * their pre-warm progress, retained versions, every live worker's versions and resident budget,
 * and the fleet's budget against the table. Lists are sorted by ID.
 */
import type { SubsetCache } from '../../core/placement/index.js';
import { fleetBudget, keptOn, keptVersions, residentMemoryOf } from '../../core/pins/index.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { compareText, isLive, workersById } from '../../projections/queries.js';
import { holdsVersion, type Residency } from '../../projections/routing-state.js';
import type {
  PinStatusResponse,
  StagedPin,
  SubsetMember,
  TenantPin,
  VersionCalls,
  WorkerResidency,
} from '../../proto/gen/readie/v1/pins.js';

/** The subset members of (tenant, version, k) with what each reported of the version. */
function members(
  state: ClusterState,
  tenantId: string,
  version: string,
  k: number,
  subsets?: SubsetCache,
): SubsetMember[] {
  return keptOn(state, { tenantId, version, k, reason: 'pinned', alsoOn: [] }, subsets).map(
    (workerId) => {
      const reported = state.routing.workers.get(workerId)?.versions.get(version);
      return { workerId, state: reported?.state ?? '', error: reported?.error ?? '' };
    },
  );
}

/** A tenant's calls in flight, by the version serving them. */
function inFlight(state: ClusterState, tenantId: string): VersionCalls[] {
  const counts = new Map<string, number>();
  for (const reservation of state.reservations.values()) {
    if (state.routing.calls.get(reservation.requestId)?.tenantId !== tenantId) continue;
    const version = reservation.checkpointId ?? '';
    counts.set(version, (counts.get(version) ?? 0) + 1);
  }
  return [...counts]
    .sort(([a], [b]) => compareText(a, b))
    .map(([version, calls]) => ({ version, calls }));
}

/** The pin status of `state` at `now` (epoch ms), for one tenant or all. */
export function pinStatusOf(
  state: ClusterState,
  now: number,
  tenantId: string,
  subsets?: SubsetCache,
): PinStatusResponse {
  const { routing } = state;
  const wanted = (id: string) => tenantId === '' || id === tenantId;
  const pins: TenantPin[] = [...routing.entries.values()]
    .filter((entry) => wanted(entry.tenantId))
    .sort((a, b) => compareText(a.tenantId, b.tenantId))
    .map((entry) => ({
      tenantId: entry.tenantId,
      version: entry.version,
      k: entry.k,
      revision: entry.revision,
      previousVersion: entry.previousVersion ?? '',
      since: entry.since,
      subset: members(state, entry.tenantId, entry.version, entry.k, subsets),
      inFlight: inFlight(state, entry.tenantId),
    }));
  const staged: StagedPin[] = [...routing.staged.values()]
    .filter((pin) => wanted(pin.tenantId))
    .sort((a, b) => compareText(a.tenantId, b.tenantId))
    .map((pin) => {
      const subset = members(state, pin.tenantId, pin.version, pin.k, subsets);
      return {
        tenantId: pin.tenantId,
        version: pin.version,
        k: pin.k,
        targetWorkers: [...pin.targetWorkers],
        subset,
        ready:
          subset.length > 0 &&
          subset.every((member) => holdsVersion(routing, member.workerId, pin.version)),
        since: pin.since,
      };
    });
  const retention = state.config.PIN_RETENTION;
  const retained = [...routing.retained.values()]
    .filter((entry) => wanted(entry.tenantId) && Date.parse(entry.since) + retention > now)
    .sort((a, b) => compareText(a.tenantId, b.tenantId) || compareText(a.version, b.version))
    .map((entry) => ({
      tenantId: entry.tenantId,
      version: entry.version,
      until: new Date(Date.parse(entry.since) + retention).toISOString(),
    }));
  const budget = fleetBudget(state, keptVersions(routing, now, retention), subsets);
  const workers: WorkerResidency[] = workersById(state)
    .filter(isLive)
    .map((worker) => {
      const part = routing.workers.get(worker.workerId);
      const protectedIds = new Set(part?.protectedIds ?? []);
      const versions = [...(part?.versions ?? new Map<string, Residency>())]
        .sort(([a], [b]) => compareText(a, b))
        .map(([checkpointId, residency]) => ({
          checkpointId,
          state: residency.state,
          error: residency.error ?? '',
          protected: protectedIds.has(checkpointId),
          residentMemory: residentMemoryOf(state, checkpointId),
        }));
      return {
        workerId: worker.workerId,
        residentMemory: part?.residentMemory ?? undefined,
        residentUsed: versions
          .filter((version) => version.state === 'resident' || version.state === 'loading')
          .reduce((sum, version) => sum + version.residentMemory, 0),
        protectedMemory: [...protectedIds].reduce(
          (sum, id) => sum + residentMemoryOf(state, id),
          0,
        ),
        versions,
        coldLoads: (part?.loads ?? []).map((load) => load.checkpointId),
      };
    });
  return {
    revision: routing.revision,
    pins,
    staged,
    retained,
    workers,
    budget: {
      required: budget.required,
      offered: budget.offered,
      workersWithoutBudget: budget.workersWithoutBudget,
      overBudget: [...budget.overBudget],
      fits: budget.fits,
    },
    catalogueRevision: state.catalogue?.revision ?? '',
  };
}
