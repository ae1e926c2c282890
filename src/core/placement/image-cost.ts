/**
 * Placement rules v10's image step (docs/placement.md, "Images"): a call that names an image
 * (`CallRequested.imageKey`) goes to the filter-passing worker of lowest image cost,
 * `cover(flavor) + (holds the image ? 0 : build cost)`, ties to the ranking. `cover` is the total
 * of the cheapest row of the cost table for the call's import hints on the worker's flavor (the
 * checkpoint step's own table); the build cost is the longest build a holder of the image recorded,
 * unknown (larger than any cover) when none did. Without a catalogue, or for a call that pins its
 * checkpoint or disables optimized execution (the cost model chooses nothing for it), every cover
 * is 0: the best holder, else the ranking's choice, as under 8.
 *
 * Every walk gives the same answer: the best holder comes from the holders' index; the best
 * non-holder from the candidates in rank order (the first that passes in each flavor's run, cpu
 * workers ranking before gpu ones: one cover per flavor) or from every worker, and it is looked
 * for only when it could beat the holder.
 */
import type { Catalogue } from '../../events/catalogue.js';
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { imageBuildCost, imageHolders } from '../../projections/image-holdings.js';
import { isPlaceable } from '../../projections/queries.js';
import type { RankedCandidates } from './candidate-index.js';
import { cheapest, costTable, flavorCatalogue, importCost } from './checkpoints.js';
import type { WorkerImageCost } from './explanation.js';
import { firstFailure } from './filters/index.js';
import { imageCostReason, type ImageCost } from './image-cost-words.js';
import type { Placing } from './placing.js';
import { compareWorkers } from './ranking/index.js';
import type { Scan } from './scan.js';

/** A worker's flavor: the only keys a cover is worked out for. */
type Flavor = WorkerRecord['flavor'];

/**
 * One call's image step: what every part reads, and the covers worked out so far (one per
 * flavor, NaN until asked: two fields, not a map, as a call meets at most the two flavors).
 */
interface CostingCall {
  readonly placing: Placing;
  readonly holders: ReadonlyMap<string, number> | undefined;
  /**
   * The image's build cost; null: unknown (no holder recorded one), or not read (no holder
   * passes: every candidate would pay it, so it decides nothing).
   */
  build: number | null;
  /** The candidates in rank order, when the walk came from the index; else null. */
  readonly sorted: RankedCandidates | null;
  cpuCover: number;
  gpuCover: number;
}

/** A flavor the catalogue does not list: the dearest listed cold start plus every hint's import. */
function unlistedCover(catalogue: Catalogue, hints: readonly string[]): number {
  let coldStart = 0;
  for (const listed of Object.values(catalogue.flavors)) {
    if (listed.coldStartCost > coldStart) coldStart = listed.coldStartCost;
  }
  return hints.reduce((sum, module) => sum + importCost(catalogue, module), coldStart);
}

/** What the cheapest start of the call on a worker of `flavor` costs, worked out. */
function workOutCover(placing: Placing, flavor: Flavor): number {
  const catalogue = placing.state.catalogue;
  const { demand } = placing.call;
  // The cost model chooses nothing for a call that pins its checkpoint or starts cold (under 9
  // a pinned checkpoint a flavor does not list refused the call there: no cover may send it there).
  if (catalogue === null || demand.disableOptimizedExecution === true) return 0;
  if ((demand.checkpointId ?? '') !== '') return 0;
  const hints = demand.imports;
  const listed = flavorCatalogue(catalogue, flavor);
  if (!listed) return unlistedCover(catalogue.catalogue, [...new Set(hints ?? [])]);
  const rows = costTable(catalogue.catalogue, listed, hints);
  // Kept for the checkpoint step, which reads the chosen worker's flavor's table.
  (placing.costTables ??= new Map()).set(flavor, rows);
  return cheapest(rows)?.total ?? 0;
}

/** The cover of `flavor` for this call (worked out once per flavor). */
function coverOf(costing: CostingCall, flavor: Flavor): number {
  if (flavor === 'gpu') {
    if (Number.isNaN(costing.gpuCover)) costing.gpuCover = workOutCover(costing.placing, flavor);
    return costing.gpuCover;
  }
  if (Number.isNaN(costing.cpuCover)) costing.cpuCover = workOutCover(costing.placing, flavor);
  return costing.cpuCover;
}

/** A worker's image cost as a number; unknown for a build of unknown cost. */
export function imageCostTotal(cost: ImageCost, build: number | null): number | null {
  if (cost.holds) return cost.cover;
  return build === null ? null : cost.cover + build;
}

/**
 * Negative when `a` costs less than `b`: an unknown build costs more than any cover (a holder
 * beats any builder), and equal costs go to the ranking.
 */
function compareCosts(a: ImageCost, b: ImageCost, costing: CostingCall): number {
  const { build } = costing;
  if (build === null && a.holds !== b.holds) return a.holds ? -1 : 1;
  const difference = (imageCostTotal(a, build) ?? a.cover) - (imageCostTotal(b, build) ?? b.cover);
  if (difference !== 0) return difference;
  return compareWorkers(a.worker, b.worker, costing.placing.budget);
}

/** Whether `worker` is a candidate that passes every filter (as the scans count them). */
function passes(costing: CostingCall, worker: WorkerRecord): boolean {
  const { budget, config, unreachable } = costing.placing;
  if (!isPlaceable(worker) || unreachable.includes(worker.workerId)) return false;
  return firstFailure(worker, budget, config) < 0;
}

/**
 * The holder of lowest image cost among those that pass every filter: every holder pays no build,
 * so the lowest cover, then the ranking.
 */
function bestHolder(costing: CostingCall): ImageCost | undefined {
  if (costing.holders === undefined) return undefined;
  const { workers } = costing.placing.state;
  const { budget } = costing.placing;
  let best: WorkerRecord | undefined;
  let bestCover = 0;
  for (const workerId of costing.holders.keys()) {
    const worker = workers.get(workerId);
    if (worker === undefined || !passes(costing, worker)) continue;
    const cover = coverOf(costing, worker.flavor);
    if (
      best === undefined ||
      cover < bestCover ||
      (cover === bestCover && compareWorkers(worker, best, budget) < 0)
    ) {
      best = worker;
      bestCover = cover;
    }
  }
  return best === undefined ? undefined : { worker: best, holds: true, cover: bestCover };
}

/** The first non-holder in `sorted[from, to)` that passes every filter. */
function firstNonHolder(
  costing: CostingCall,
  sorted: RankedCandidates,
  from: number,
  to: number,
): WorkerRecord | undefined {
  const { budget, config } = costing.placing;
  for (let i = from; i < to; i += 1) {
    const worker = sorted.at(i).worker;
    if (costing.holders?.has(worker.workerId) === true) continue;
    if (firstFailure(worker, budget, config) < 0) return worker;
  }
  return undefined;
}

/**
 * The best non-holder from the candidates in rank order: every worker of a flavor has its
 * flavor's cover, so the first that passes in the cpu run and (when its cover is lower) in the gpu
 * run are the only ones that can win; a cpu worker ranks before a gpu one, so it wins a tie. With
 * no holder the scan's best (`scanned`) is the first that passes: the first of its flavor's run.
 */
function bestNonHolderRanked(
  costing: CostingCall,
  sorted: RankedCandidates,
  scanned: WorkerRecord,
): ImageCost | undefined {
  const noHolder = costing.holders === undefined;
  let cpu: WorkerRecord | undefined;
  if (noHolder) cpu = scanned.flavor === 'gpu' ? undefined : scanned;
  else if (!costing.placing.budget.gpuCall) {
    cpu = firstNonHolder(costing, sorted, 0, sorted.firstGpu);
  }
  let best: ImageCost | undefined;
  if (cpu !== undefined) best = { worker: cpu, holds: false, cover: coverOf(costing, cpu.flavor) };
  // No gpu candidate, or none cheaper: the cpu run's first stands (its cover read only if needed).
  const gpuStart = sorted.firstGpu;
  if (best !== undefined && (gpuStart === sorted.length || coverOf(costing, 'gpu') >= best.cover)) {
    return best;
  }
  if (noHolder && scanned.flavor === 'gpu') {
    return { worker: scanned, holds: false, cover: coverOf(costing, 'gpu') };
  }
  const gpu = firstNonHolder(costing, sorted, gpuStart, sorted.length);
  return gpu === undefined ? best : { worker: gpu, holds: false, cover: coverOf(costing, 'gpu') };
}

/** The best non-holder from every worker of the state. */
function bestNonHolderOfAll(costing: CostingCall): ImageCost | undefined {
  let best: ImageCost | undefined;
  for (const worker of costing.placing.state.workers.values()) {
    if (costing.holders?.has(worker.workerId) === true || !passes(costing, worker)) continue;
    const cost = { worker, holds: false, cover: coverOf(costing, worker.flavor) };
    if (best === undefined || compareCosts(cost, best, costing) < 0) best = cost;
  }
  return best;
}

/**
 * The lowest cover the call can meet: a GPU call runs on gpu workers, a CPU call on either; a
 * flavor no ranked candidate has does not count (a full walk does not know, and counts both).
 */
function lowestCover(costing: CostingCall): number {
  const { sorted } = costing;
  if (costing.placing.budget.gpuCall) return coverOf(costing, 'gpu');
  if (sorted !== null) {
    const gpuStart = sorted.firstGpu;
    if (gpuStart === sorted.length) return coverOf(costing, 'cpu');
    if (gpuStart === 0) return coverOf(costing, 'gpu');
  }
  return Math.min(coverOf(costing, 'cpu'), coverOf(costing, 'gpu'));
}

/** Every filter-passing worker's image cost, by worker ID (for the explanation). */
function everyCost(costing: CostingCall): Map<string, WorkerImageCost> {
  const costs = new Map<string, WorkerImageCost>();
  for (const worker of costing.placing.state.workers.values()) {
    if (!passes(costing, worker)) continue;
    const holds = costing.holders?.has(worker.workerId) === true;
    const cost = { worker, holds, cover: coverOf(costing, worker.flavor) };
    costs.set(worker.workerId, {
      held: holds,
      cover: cost.cover,
      build: holds ? 0 : costing.build,
      total: imageCostTotal(cost, costing.build),
    });
  }
  return costs;
}

/**
 * `scan` with the worker of lowest image cost as its best. `sorted`: the candidates in rank order
 * when the walk came from the index; null when it walked every worker.
 */
export function chooseByImageCost(
  placing: Placing,
  imageKey: string,
  sorted: RankedCandidates | null,
  scan: Scan,
): Scan {
  const { state, explain } = placing;
  const holders = state.imageKeys.get(imageKey);
  const costing: CostingCall = {
    placing,
    holders,
    build: null,
    sorted,
    cpuCover: Number.NaN,
    gpuCover: Number.NaN,
  };
  if (holders !== undefined && explain !== undefined) {
    costing.build = imageBuildCost(state.images, state.imageKeys, imageKey);
  }
  let chosen: ImageCost | undefined;
  let holder: ImageCost | undefined;
  let builder: ImageCost | undefined;
  // No candidate passes every filter: nothing to choose among (the scan said so).
  if (scan.best !== undefined) {
    holder = bestHolder(costing);
    if (holder !== undefined && explain === undefined) {
      costing.build = imageBuildCost(state.images, state.imageKeys, imageKey);
    }
    const { build } = costing;
    const builderMayWin =
      holder === undefined || (build !== null && lowestCover(costing) + build <= holder.cover);
    if (builderMayWin || explain !== undefined) {
      builder =
        sorted === null
          ? bestNonHolderOfAll(costing)
          : bestNonHolderRanked(costing, sorted, scan.best);
    }
    chosen =
      holder === undefined || (builder !== undefined && compareCosts(builder, holder, costing) < 0)
        ? builder
        : holder;
  }
  if (explain !== undefined) {
    explain.image({
      imageKey,
      holders: imageHolders(state.imageKeys, imageKey),
      chosen: chosen?.worker.workerId ?? null,
      buildCost: costing.build,
      reason: imageCostReason(chosen, holder, builder, costing.build, holders !== undefined),
    });
    explain.imageCosts(everyCost(costing));
  }
  return chosen === undefined || chosen.worker === scan.best
    ? scan
    : { ...scan, best: chosen.worker };
}
