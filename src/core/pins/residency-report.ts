/**
 * A worker's residency report as events (pure): its resident budget when it changed
 * (`ResidencyBudget`), and each version whose state or error changed (`ResidencyChanged`).
 * A report from a worker the router does not know (or evicted) records nothing: the worker must
 * report its status first.
 */
import type { Cause } from '../../events/cause.js';
import type { ResidencyState } from '../../events/schema.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { liveWorkerOf } from '../consequences/index.js';
import type { Decision } from '../decision.js';

/** One version's state in a report. */
export interface VersionReport {
  readonly checkpointId: string;
  readonly state: ResidencyState;
  /** Why, for `failed`; null otherwise. */
  readonly error: string | null;
}

/** A worker's residency report. */
export interface ResidencyReport {
  readonly workerId: string;
  /** Its resident budget in bytes; null: no limit. */
  readonly residentMemory: number | null;
  readonly versions: readonly VersionReport[];
}

/** A residency report's decision (`report:WORKER`). */
export interface ResidencyReportDecision extends Decision {
  /** False when the router does not know the worker: it must report its status again. */
  readonly registered: boolean;
}

/** The longest checkpoint ID a report may name. */
const MAX_CHECKPOINT_ID_LENGTH = 256;

/** Whether the catalogue in force lists `checkpointId` for any flavor. */
function listed(state: ClusterState, checkpointId: string): boolean {
  for (const flavor of Object.values(state.catalogue?.catalogue.flavors ?? {})) {
    if (flavor.checkpoints.some((checkpoint) => checkpoint.id === checkpointId)) return true;
  }
  return false;
}

/**
 * The events of a residency report. Versions the catalogue in force does not list are left out:
 * no placement asks about them, and a worker must not grow the router's state with names of its
 * own.
 */
export function decideResidencyReport(
  state: ClusterState,
  report: ResidencyReport,
): ResidencyReportDecision {
  const cause: Cause = { kind: 'report', workerId: report.workerId };
  if (!liveWorkerOf(state, report.workerId)) return { cause, registered: false, events: [] };
  const known = state.routing.workers.get(report.workerId);
  const events: NewEvent[] = [];
  if (known === undefined || known.residentMemory !== report.residentMemory) {
    events.push({
      type: 'ResidencyBudget',
      workerId: report.workerId,
      residentMemory: report.residentMemory,
    });
  }
  for (const version of report.versions) {
    if (version.checkpointId.length > MAX_CHECKPOINT_ID_LENGTH) continue;
    if (!listed(state, version.checkpointId)) continue;
    const before = known?.versions.get(version.checkpointId);
    // A repeated `loading` is news (a load starting again), any other repeat is not.
    if (
      before?.state === version.state &&
      before.error === version.error &&
      version.state !== 'loading'
    ) {
      continue;
    }
    events.push({
      type: 'ResidencyChanged',
      workerId: report.workerId,
      checkpointId: version.checkpointId,
      state: version.state,
      error: version.state === 'failed' ? (version.error ?? 'no reason given') : null,
    });
  }
  return { cause, registered: true, events };
}
