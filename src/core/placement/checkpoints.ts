/**
 * The checkpoint cost model (docs/placement.md). The cost of restoring checkpoint `c` for import hints
 * `H` is `c.restoreCost + sum(importCost(m) for m in H not in c.modules)`; a cold start costs the
 * flavor's `coldStartCost` plus every hint's import cost. The cheapest wins; ties go to the
 * checkpoint whose ID sorts first as text, and a checkpoint wins a tie with a cold start.
 */
import type { Catalogue, FlavorCatalogue } from '../../events/catalogue.js';
import type { CatalogueInForce } from '../../projections/cluster-state.js';
import { compareText } from '../../projections/queries.js';

/** One row of the cost table: a checkpoint (or a cold start, `checkpointId` null). */
export interface CostRow {
  readonly checkpointId: string | null;
  /** The restore cost, or the cold-start cost. */
  readonly baseCost: number;
  /** Hinted modules the checkpoint has not imported. */
  readonly missingImports: readonly string[];
  readonly importCost: number;
  readonly total: number;
}

/** The catalogue entry of a flavor, if a catalogue is loaded and lists it. */
export function flavorCatalogue(
  catalogue: CatalogueInForce | null,
  flavor: string,
): FlavorCatalogue | undefined {
  return catalogue?.catalogue.flavors[flavor];
}

/** What importing `module` costs by the catalogue (its `importCosts` entry, else the default). */
export function importCost(catalogue: Catalogue, module: string): number {
  return catalogue.importCosts[module] ?? catalogue.defaultImportCost;
}

function row(
  catalogue: Catalogue,
  checkpointId: string | null,
  baseCost: number,
  modules: readonly string[],
  hints: readonly string[],
): CostRow {
  const missingImports = hints.filter((hint) => !modules.includes(hint));
  const cost = missingImports.reduce((sum, module) => sum + importCost(catalogue, module), 0);
  return { checkpointId, baseCost, missingImports, importCost: cost, total: baseCost + cost };
}

/**
 * The cost of every checkpoint of a flavor, sorted by ID, then the cold start, for `hints`.
 * On-demand checkpoints (tenants' versions) are left out: the cost model never picks one for a
 * call that did not name it.
 */
export function costTable(
  catalogue: Catalogue,
  flavor: FlavorCatalogue,
  imports: readonly string[] | null,
): CostRow[] {
  const hints = [...new Set(imports ?? [])].sort(compareText);
  const rows = flavor.checkpoints
    .filter((checkpoint) => checkpoint.onDemand !== true)
    .sort((a, b) => compareText(a.id, b.id))
    .map((checkpoint) =>
      row(catalogue, checkpoint.id, checkpoint.restoreCost, checkpoint.modules, hints),
    );
  rows.push(row(catalogue, null, flavor.coldStartCost, [], hints));
  return rows;
}

/** The cheapest row: the first with the lowest total (rows come sorted, cold start last). */
export function cheapest(rows: readonly CostRow[]): CostRow | undefined {
  let best: CostRow | undefined;
  for (const candidate of rows) if (!best || candidate.total < best.total) best = candidate;
  return best;
}
