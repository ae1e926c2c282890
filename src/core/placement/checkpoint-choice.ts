/**
 * Rule 5 of the seed rules: the checkpoint of a new container on the chosen worker, by the cost
 * model (`checkpoints.ts`), unless the call pins one, disables them, or no catalogue lists the
 * worker's flavor.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { cheapest, costTable, flavorCatalogue, type CostRow } from './checkpoints.js';
import type { Placing } from './placing.js';

/** The checkpoint chosen (null: a cold start), or why the call's own cannot be used. */
export type CheckpointChoice =
  | { readonly ok: true; readonly checkpointId: string | null }
  | { readonly ok: false; readonly message: string };

/** Records a checkpoint choice in the explanation being built. */
type RecordCheckpoint = (chosen: string | null, reason: string, rows?: readonly CostRow[]) => void;

/** The recorder of a placement nobody explains. */
const RECORD_NOTHING: RecordCheckpoint = () => undefined;

/** Rule 5: the checkpoint for a new container on `worker`. */
export function chooseCheckpoint(placing: Placing, worker: WorkerRecord): CheckpointChoice {
  const { demand } = placing.call;
  const { explain } = placing;
  const catalogue = placing.state.catalogue;
  const flavor = flavorCatalogue(catalogue, worker.flavor);
  // Made only when explaining: a call placed without an explanation makes no closure.
  const record: RecordCheckpoint =
    explain === undefined
      ? RECORD_NOTHING
      : (chosen, reason, rows = []) =>
          explain.checkpoint({
            flavor: worker.flavor,
            catalogueRevision: catalogue?.revision ?? null,
            rows,
            chosen,
            reason,
          });
  if (demand.disableOptimizedExecution === true) {
    record(null, 'disable_optimized_execution: cold start, no checkpoint');
    return { ok: true, checkpointId: null };
  }
  const pinned = demand.checkpointId ?? '';
  if (pinned !== '') {
    if (!flavor || !flavor.checkpoints.some((checkpoint) => checkpoint.id === pinned)) {
      const known = flavor ? flavor.checkpoints.map((c) => c.id).join(', ') || 'none' : 'none';
      const where = catalogue
        ? `the catalogue (revision ${catalogue.revision}) of flavor ${worker.flavor} (known: ${known})`
        : 'any catalogue: none is loaded';
      record(null, `pinned checkpoint "${pinned}" refused`);
      return { ok: false, message: `checkpoint "${pinned}" is not in ${where}` };
    }
    record(pinned, 'pinned by the call: scoring skipped');
    return { ok: true, checkpointId: pinned };
  }
  if (!catalogue || !flavor) {
    record(
      null,
      catalogue
        ? `the catalogue has no entry for flavor ${worker.flavor}: cold start`
        : 'no catalogue loaded: cold start',
    );
    return { ok: true, checkpointId: null };
  }
  // The image step may have made this flavor's table for this call already.
  const rows =
    placing.costTables?.get(worker.flavor) ??
    costTable(catalogue.catalogue, flavor, demand.imports);
  const winner = cheapest(rows);
  const chosen = winner?.checkpointId ?? null;
  record(chosen, chosen === null ? 'a cold start is cheapest' : `"${chosen}" is cheapest`, rows);
  return { ok: true, checkpointId: chosen };
}
