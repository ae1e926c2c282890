/**
 * Placement: a pure function of (cluster state, call, config) returning the events to append and
 * the outcome, in the order of the rules in docs/placement.md. Every call, seed or pinned
 * (docs/tenant-routing.md), takes the same steps, each a named function with one owner:
 *
 *   validate -> session affinity -> candidates -> filters -> ranking -> checkpoint or version
 *   load -> reservation
 *
 * The call's kind picks its route for the steps after session affinity (`seed-route.ts`,
 * `pinned/pinned-route.ts`). `place` is the hot path (with the caller's `PlacementCaches`, a walk
 * of the candidates best first); `explainPlacement` runs the very same steps while recording why.
 */
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import type { CallToPlace } from './call.js';
import type { PlacementDecision } from './decision.js';
import { ExplanationBuilder, type PlacementExplanation } from './explanation.js';
import { pinnedRoute } from './pinned/pinned-route.js';
import { placingOf, type PlaceOptions, type Placing } from './placing.js';
import { isDecision, type Route } from './route.js';
import type { Scan } from './scan.js';
import { SEED_ROUTE } from './seed-route.js';
import { sessionStep, type SessionStep } from './session-affinity.js';
import { validate } from './validate.js';

export type { PlaceOptions } from './placing.js';

/** Decides where `call` runs, against `state`. */
export function place(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions = {},
): PlacementDecision {
  return decide(placingOf(state, call, options, undefined));
}

/** Decides like `place` and explains why, worker by worker. */
export function explainPlacement(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions = {},
): PlacementExplanation {
  const placing = placingOf(state, call, options, undefined);
  const explanation = new ExplanationBuilder(placing.budget, placing.config);
  const decision = decide({ ...placing, explain: explanation });
  return explanation.build(call.requestId, placing.sessionId, decision);
}

/** The pipeline. */
function decide(placing: Placing): PlacementDecision {
  // Rule 0: the call itself.
  const invalid = validate(placing);
  if (invalid !== null) return invalid;
  // Rule 1: session affinity.
  const session = sessionStep(placing);
  if (session.kind === 'refused') return session.decision;
  // The rest by the call's kind: a pinned call resolves its version once, first.
  if (!placing.pinned) return follow(placing, session, SEED_ROUTE);
  const route = pinnedRoute(placing);
  return isDecision(route) ? route : follow(placing, session, route);
}

/** Rules 1 (a session's container) to 7 along `route`. */
function follow<C, S extends Scan>(
  placing: Placing,
  session: SessionStep,
  route: Route<C, S>,
): PlacementDecision {
  if (session.kind === 'reuse') return route.reuse(placing, session.worker, session.pin);
  // Rule 2: the candidates.
  const candidates = route.candidates(placing);
  if (isDecision(candidates)) return candidates;
  // Rules 3 and 4: the filters, then the ranking.
  const scan = route.scan(placing, candidates);
  const best: WorkerRecord | undefined = scan.best;
  if (best === undefined) return route.unplaced(placing, scan);
  // Rules 5 to 7: the checkpoint or the version, the packages, the reservation.
  return route.place(placing, scan, best);
}
