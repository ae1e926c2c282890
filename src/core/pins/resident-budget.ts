/**
 * The fleet's resident budget against the table (sizing is arithmetic): the table needs
 * Σ k x residentMemory over the versions it keeps (pinned, staged, retained); the workers that
 * take calls offer the sum of their resident budgets (`--resident-memory`); and no worker may be
 * told to keep more than its own budget. Pure.
 */
import type { ClusterState } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import { formatSize } from '../../shared/units.js';
import { protectedSets, type KeptVersion } from './kept-versions.js';
import type { SubsetCache } from '../placement/pinned/subset-cache.js';
import { flavorsListing, versionSpec } from '../placement/pinned/version-flavor.js';

/** The fleet's resident memory against what the table needs. */
export interface FleetBudget {
  /** Σ k x residentMemory over the kept versions, in bytes. */
  readonly required: number;
  /** Σ of the resident budgets of the workers that take calls, in bytes. */
  readonly offered: number;
  /** Workers that take calls and report no budget (not counted in `offered`). */
  readonly workersWithoutBudget: number;
  /** Workers whose protected versions would exceed their own budget, by ID. */
  readonly overBudget: readonly string[];
  /** Per worker: the resident memory of the versions it keeps, in bytes. */
  readonly protectedBytes: ReadonlyMap<string, number>;
  readonly fits: boolean;
}

/** A version's resident memory per the catalogue in force (0 when it names none). */
export function residentMemoryOf(state: ClusterState, version: string): number {
  for (const flavor of flavorsListing(state.catalogue, version)) {
    const memory = versionSpec(state.catalogue, flavor, version)?.residentMemory;
    if (memory !== undefined) return memory;
  }
  return 0;
}

/** The fleet's budget if the router kept `kept`. */
export function fleetBudget(
  state: ClusterState,
  kept: readonly KeptVersion[],
  subsets?: SubsetCache,
): FleetBudget {
  const required = kept.reduce(
    (sum, version) => sum + version.k * residentMemoryOf(state, version.version),
    0,
  );
  let offered = 0;
  let workersWithoutBudget = 0;
  const overBudget: string[] = [];
  const protectedBytes = new Map<string, number>();
  const sets = protectedSets(state, kept, subsets);
  for (const worker of state.workers.values()) {
    if (!isPlaceable(worker)) continue;
    const budget = state.routing.workers.get(worker.workerId)?.residentMemory ?? null;
    const bytes = (sets.get(worker.workerId) ?? []).reduce(
      (sum, version) => sum + residentMemoryOf(state, version),
      0,
    );
    protectedBytes.set(worker.workerId, bytes);
    if (budget === null) {
      workersWithoutBudget += 1;
      continue;
    }
    offered += budget;
    if (bytes > budget) overBudget.push(worker.workerId);
  }
  overBudget.sort();
  return {
    required,
    offered,
    workersWithoutBudget,
    overBudget,
    protectedBytes,
    // Workers that report no budget cannot be measured: a fleet of only those is taken to fit.
    fits:
      overBudget.length === 0 &&
      (required <= offered || (offered === 0 && workersWithoutBudget > 0)),
  };
}

/** The budget in words, for operators. */
export function describeBudget(budget: FleetBudget): string {
  const without =
    budget.workersWithoutBudget > 0
      ? ` (${budget.workersWithoutBudget} worker${budget.workersWithoutBudget === 1 ? '' : 's'} report no budget)`
      : '';
  const over =
    budget.overBudget.length > 0 ? `; over their own budget: ${budget.overBudget.join(', ')}` : '';
  return `resident memory: the table needs ${formatSize(budget.required)} (k x residentMemory), the workers offer ${formatSize(budget.offered)}${without}${over}`;
}
