/**
 * Deadlines in admission (docs/tenant-routing.md, "Deadlines"; placement rules v6): a pinned call
 * whose version must be cold-loaded is shed when the load cannot finish inside what its caller's
 * deadline leaves, instead of starting a load the caller will not wait for. The load's cost is
 * the version's catalogue `loadCost`, else what the worker's last load of it took (from its
 * `loading` report to its `resident` report); the time left is the call's
 * `CallRequested.deadlineMs`, how long the deadline left it as of that event. All of it is in the
 * log, so replay decides the same; no clock is read. A worker that holds the version takes the
 * call whatever its deadline (no load to wait for).
 */
import type { Flavor } from '../../../events/schema.js';
import { rulesSteps } from '../../../projections/rules-steps.js';
import { formatDuration } from '../../../shared/units.js';
import type { Placing } from '../placing.js';
import { versionSpec } from './version-flavor.js';

/** A cold load that would not finish inside the caller's deadline. */
export interface LateLoad {
  /** The version's load cost, ms. */
  readonly loadMs: number;
  /** Where it comes from: the catalogue's `loadCost`, or the worker's last load of the version. */
  readonly source: 'catalogue' | 'measured';
  /** What the caller's deadline leaves the call, ms. */
  readonly deadlineMs: number;
}

/**
 * The cold load of `version` on `workerId` (a `flavor` worker), when it cannot finish inside the
 * call's deadline (its cost at least what the deadline leaves); null when it can, when the call
 * has no deadline, when neither the catalogue nor the worker's past loads give the version a
 * cost, or under rules before 6.
 */
export function lateLoad(
  placing: Placing,
  version: string,
  flavor: Flavor,
  workerId: string,
): LateLoad | null {
  const deadlineMs = placing.call.deadlineMs ?? null;
  if (deadlineMs === null) return null;
  const { state } = placing;
  if (!rulesSteps(state.rulesVersion).shedsLoadsPastDeadline) return null;
  const declared = versionSpec(state.catalogue, flavor, version)?.loadCost ?? null;
  const measured = state.routing.workers.get(workerId)?.versions.get(version)?.loadMs ?? null;
  const loadMs = declared ?? measured;
  if (loadMs === null || loadMs < deadlineMs) return null;
  return { loadMs, source: declared === null ? 'measured' : 'catalogue', deadlineMs };
}

/** Why the call is shed: the reason `replay explain` and the caller read. */
export function lateLoadReason(version: string, workerId: string, late: LateLoad): string {
  const cost =
    late.source === 'catalogue' ? 'its catalogue loadCost' : 'its last load there, measured';
  return (
    `version "${version}" is not resident on its subset and a cold load on ${workerId} takes ` +
    `${formatDuration(late.loadMs)} (${cost}), but the caller's deadline leaves ` +
    `only ${formatDuration(late.deadlineMs)} (a load it would not wait for is not started)`
  );
}
