/**
 * The steps after session affinity, which differ by the kind of call: the seed rules
 * (`seed-route.ts`) or a tenant's pinned version (`pinned/pinned-route.ts`). `place.ts` takes
 * every call through the same steps; a route says how each is taken for its kind.
 */
import type { SessionPin, WorkerRecord } from '../../projections/cluster-state.js';
import type { PlacementDecision } from './decision.js';
import type { Placing } from './placing.js';
import type { Scan } from './scan.js';

/** How one kind of call takes the steps after session affinity. */
export interface Route<C, S extends Scan> {
  /** Rule 1, its end: the session's container takes the call (or cannot, for this kind). */
  reuse(placing: Placing, worker: WorkerRecord, pin: SessionPin): PlacementDecision;
  /** Rule 2: the candidates (every placeable worker, or the version's subset), or a refusal. */
  candidates(placing: Placing): C | PlacementDecision;
  /** Rules 3 and 4: the filters, then the ranking, over the candidates. */
  scan(placing: Placing, candidates: C): S;
  /**
   * No candidate, or none passes the filters: the refusal. The one place a call that does not
   * fit now is answered, so the place where it could wait instead.
   */
  unplaced(placing: Placing, scan: S): PlacementDecision;
  /**
   * Rules 5 to 7 on the chosen worker: the checkpoint of a new container, or the version (and
   * whether it must load first), then the packages and the reservation.
   */
  place(placing: Placing, scan: S, worker: WorkerRecord): PlacementDecision;
}

/** Whether a step's answer is already the decision (a refusal) rather than its result. */
export function isDecision<T>(value: T | PlacementDecision): value is PlacementDecision {
  return typeof value === 'object' && value !== null && 'outcome' in value;
}
