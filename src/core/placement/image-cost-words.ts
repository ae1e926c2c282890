/**
 * The words `replay explain` prints for rules v10's image step: how the worker of lowest image
 * cost was chosen, with each side's cost in parts (docs/placement.md, "Images").
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';

/** A filter-passing worker's image cost, in parts. */
export interface ImageCost {
  readonly worker: WorkerRecord;
  readonly holds: boolean;
  /** Its flavor's cheapest start for the call's import hints. */
  readonly cover: number;
}

/** A cost as an operator reads it: whole numbers grouped by thousands (12,060). */
export function costText(cost: number): string {
  if (!Number.isInteger(cost)) return String(cost);
  return String(cost).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A builder's cost and its parts ("1,090 (cover 90 + build 1,000)"); unknown without a build. */
function buildingText(cost: ImageCost, build: number | null): string {
  return build === null
    ? `unknown (cover ${costText(cost.cover)} + a build of unknown cost)`
    : `${costText(cost.cover + build)} (cover ${costText(cost.cover)} + build ${costText(build)})`;
}

/**
 * Why `chosen` was chosen: against the best builder when a holder won, against the best holder
 * when a builder did. `anyHolder`: some worker holds the image (whether or not it passes).
 */
export function imageCostReason(
  chosen: ImageCost | undefined,
  holder: ImageCost | undefined,
  builder: ImageCost | undefined,
  build: number | null,
  anyHolder: boolean,
): string {
  if (chosen === undefined) return 'no worker passes every filter: nothing to choose among';
  const id = chosen.worker.workerId;
  if (chosen.holds) {
    const held = `${id} holds the image: cost ${costText(chosen.cover)} (cover ${costText(chosen.cover)})`;
    if (builder === undefined) return `${held}; no worker without it passes the filters`;
    if (build === null) {
      return `${held}; a build elsewhere costs more (no holder recorded how long its build took)`;
    }
    return `${held}; the best build elsewhere, on ${builder.worker.workerId}, costs ${buildingText(builder, build)}`;
  }
  if (holder !== undefined) {
    return (
      `${id} builds the image: cost ${buildingText(chosen, build)}; the best holder, ` +
      `${holder.worker.workerId}, costs ${costText(holder.cover)} (cover ${costText(holder.cover)})`
    );
  }
  const where = `it is built on ${id}, whose cover is lowest: ${costText(chosen.cover)}`;
  return anyHolder
    ? `no worker that holds the image passes the filters: ${where}`
    : `no worker holds the image: ${where}`;
}
