/**
 * The seed rules after session affinity (docs/placement.md, rules 2 to 7), for every call that
 * does not ask for its tenant's pinned version: every placeable worker is a candidate, the
 * filters and the ranking pick the best, the cost model its checkpoint.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import type { RankedCandidates } from './candidate-index.js';
import { chooseCheckpoint } from './checkpoint-choice.js';
import { FILTERS } from './filters/index.js';
import type { Fit, RejectedDecision } from './decision.js';
import { neverFits } from './never-fits.js';
import { rejected, reserve } from './outcome.js';
import { scanKey, type Placing } from './placing.js';
import type { Route } from './route.js';
import { decidesAdmission } from './rules-version.js';
import { explainScan, scanAll, scanInRankOrder, type Scan } from './scan.js';
import { preferImageHolder } from './image-preference.js';

/**
 * Rule 2's candidates, as the fastest walk the caller allows reads them (every walk gives the
 * same answer): the caller's index, best first; else every worker of the state. A call placed
 * again after a failed dial, or one being explained, walks them all.
 */
export type SeedCandidates =
  | { readonly walk: 'ranked'; readonly sorted: RankedCandidates }
  | { readonly walk: 'all'; readonly workers: Iterable<WorkerRecord> };

/** Why no worker is available, naming those this call could not reach. */
function unavailable(placing: Placing): string {
  const { unreachable, dialError } = placing;
  return unreachable.length === 0
    ? 'no workers available'
    : `no workers available: the router could not reach ${unreachable.join(', ')} for this call` +
        (dialError === undefined ? '' : ` (${dialError})`);
}

/** Each filter that ruled candidates out, with how many. */
function ruledOut(failures: readonly number[]): string {
  return FILTERS.map((filter, i) => [filter.name, failures[i] ?? 0] as const)
    .filter(([, count]) => count > 0)
    .map(([name, count]) => `${name} ruled out ${count}`)
    .join(', ');
}

/**
 * `refusal` (made just now, held by no one else), saying whether the call never fits or does not
 * fit now. Set on it rather than copied: a spread followed by a field costs V8 microseconds, and
 * admission asks this of every tenant's head that does not fit.
 */
function withFit(refusal: RejectedDecision, fit: Fit): RejectedDecision {
  return Object.assign(refusal, { fit });
}

/**
 * "Not now" as a `fitOnly` caller reads it (`PlaceOptions.fitOnly`): nothing but the fit, so no
 * words or events are made for it. Shared and frozen: admission asks this of every tenant's head
 * while no worker has room.
 */
const NOT_NOW: RejectedDecision = Object.freeze({
  outcome: 'rejected',
  events: Object.freeze([]),
  code: 'RESOURCE_EXHAUSTED',
  message: 'no worker can accept this request now',
  version: null,
  routingRevision: null,
  retryAfterMs: null,
  fit: 'not-now',
});

/** Rules 2 to 4 over the candidates, by the walk they came in. */
function seedScan(placing: Placing, candidates: SeedCandidates): Scan {
  const { budget, config, explain, unreachable } = placing;
  if (candidates.walk === 'ranked') {
    const { scans, caches, state } = placing;
    // No free container slot anywhere: nothing fits now, whatever the budget.
    if (placing.fitOnly && caches?.candidates.withRoom(state.workers) === 0) {
      return { best: undefined, candidates: candidates.sorted.length, failures: [] };
    }
    if (scans === undefined) return scanInRankOrder(candidates.sorted, budget, config);
    const key = scanKey(budget);
    const known = scans.get(key);
    if (known !== undefined) return known;
    const scan = scanInRankOrder(candidates.sorted, budget, config);
    scans.set(key, scan);
    return scan;
  }
  if (explain) return explainScan(candidates.workers, budget, config, explain, unreachable);
  return scanAll(candidates.workers, budget, config, unreachable);
}

/** The seed rules' route. */
export const SEED_ROUTE: Route<SeedCandidates, Scan> = {
  reuse: (placing, worker, pin) =>
    reserve(placing, worker, { containerId: pin.containerId, checkpointId: pin.checkpointId }),

  candidates: (placing) =>
    placing.caches !== undefined && placing.unreachable.length === 0 && !placing.explain
      ? { walk: 'ranked', sorted: placing.caches.candidates.candidates(placing.state.workers) }
      : { walk: 'all', workers: placing.state.workers.values() },

  scan: (placing, candidates) =>
    preferImageHolder(
      placing,
      candidates.walk === 'ranked' ? candidates.sorted : null,
      seedScan(placing, candidates),
    ),

  unplaced: (placing, scan) => {
    const { call, before, state, budget, config, unreachable } = placing;
    if (scan.candidates === 0) return rejected(call, before, 'UNAVAILABLE', unavailable(placing));
    const admission = decidesAdmission(state.rulesVersion);
    const never = admission ? neverFits(state.workers.values(), budget, config, unreachable) : null;
    if (never !== null) {
      return withFit(rejected(call, before, 'RESOURCE_EXHAUSTED', never), 'never');
    }
    // Admission passes over a head that does not fit now, reading nothing else of the answer.
    if (admission && placing.fitOnly) return NOT_NOW;
    const candidates = `${scan.candidates} candidate${scan.candidates === 1 ? '' : 's'}`;
    const refusal = rejected(
      call,
      before,
      'RESOURCE_EXHAUSTED',
      `no worker can accept this request (${candidates}: ${ruledOut(scan.failures)})`,
    );
    return admission ? withFit(refusal, 'not-now') : refusal;
  },

  place: (placing, _scan, worker) => {
    const checkpoint = chooseCheckpoint(placing, worker);
    if (!checkpoint.ok) {
      return rejected(placing.call, placing.before, 'INVALID_ARGUMENT', checkpoint.message);
    }
    return reserve(placing, worker, { containerId: null, checkpointId: checkpoint.checkpointId });
  },
};
