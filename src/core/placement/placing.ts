/**
 * One call being placed: what every step of the pipeline reads (the state, the call, the config
 * and budget, the caller's caches, the workers earlier attempts could not reach, the explanation
 * being built) and what the steps decide along the way (the parsed packages, a dropped pin's
 * `SessionUnpinned`). Made once per decision by `place.ts`.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { budgetOf, sessionIdOf, type Budget, type CallToPlace } from './call.js';
import type { CostRow } from './checkpoints.js';
import type { ExplanationBuilder } from './explanation.js';
import type { PackageRequirement } from './packages.js';
import type { PlacementCaches } from './placement-caches.js';
import type { Scan } from './scan.js';

/** What a decision may be given besides the state and the call. */
export interface PlaceOptions {
  /** The config to decide under; default the config in force (`state.config`). */
  readonly config?: Config;
  /**
   * The caller's caches for this state (fold the state with them as its change sink). Without,
   * placement decides the same, walking every worker.
   */
  readonly caches?: PlacementCaches;
  /**
   * Workers earlier attempts of the call could not reach (a failed dial): never candidates (a
   * pinned call's subset still counts them, so it stays the same subset: the call may only go to
   * its other members). Default: those the state records for the call while it waits to be placed
   * again.
   */
  readonly unreachable?: readonly string[];
  /** Why the last of them could not be reached: said when no other worker is left. */
  readonly dialError?: string;
  /**
   * Scans already made against this very state, by budget: the caller's, for one state only (a
   * decision that places several calls against one state, as admission offers each tenant's head
   * a slot, passes one so calls of one budget walk the candidates once). A scan is a function of
   * the candidates and the budget, so the answer is the same with or without it.
   */
  readonly scans?: ScanMemo;
  /**
   * The caller reads only whether the call is placed, and the words of a refusal that is not
   * "not now" (admission, which passes over a head that does not fit now): a walk that knows no
   * candidate has a free container slot stops there, and the seed route's "not now" is one
   * shared answer with no events and fixed words (a pinned call's shed still says why).
   */
  readonly fitOnly?: boolean;
}

/** Scans of the candidates by budget, for one state (see `PlaceOptions.scans`). */
export type ScanMemo = Map<string, Scan>;

/** The key of `budget` in a `ScanMemo`. */
export function scanKey(budget: Budget): string {
  return `${budget.memory}/${budget.gpuMemory}/${budget.gpuCall ? 'gpu' : 'cpu'}`;
}

/** The call being placed, and what the steps so far decided. */
export interface Placing {
  readonly state: ClusterState;
  readonly call: CallToPlace;
  readonly config: Config;
  readonly budget: Budget;
  /** The call's session (the wire's empty string is none). */
  readonly sessionId: string | null;
  /** The caller's tenant; null without one. */
  readonly tenantId: string | null;
  /** Whether the call asks for its tenant's pinned version (docs/tenant-routing.md). */
  readonly pinned: boolean;
  readonly caches: PlacementCaches | undefined;
  /** Workers earlier attempts of this call could not reach (its stream could not be opened). */
  readonly unreachable: readonly string[];
  readonly dialError: string | undefined;
  /** Scans already made against this state, by budget (`PlaceOptions.scans`). */
  readonly scans: ScanMemo | undefined;
  /** Whether the caller reads only the fit (`PlaceOptions.fitOnly`). */
  readonly fitOnly: boolean;
  /** The explanation being built; undefined on the hot path. */
  readonly explain: ExplanationBuilder | undefined;
  /** The call's packages, once validation parsed them. */
  requirements: readonly PackageRequirement[];
  /**
   * The cost tables worked out for the call's import hints, by flavor (rules 10's image step
   * makes them, the checkpoint step reads the chosen worker's); undefined until one is made.
   */
  costTables: Map<string, readonly CostRow[]> | undefined;
  /** Events decided before the outcome (a dropped pin's `SessionUnpinned`), in order. */
  readonly before: NewEvent[];
}

/** The call `call` about to be placed against `state`. */
export function placingOf(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions,
  explain: ExplanationBuilder | undefined,
): Placing {
  const config = options.config ?? state.config;
  return {
    state,
    call,
    config,
    budget: budgetOf(call.demand, config),
    sessionId: sessionIdOf(call.sessionId),
    tenantId: call.tenantId ?? null,
    pinned: call.demand.pinned === true,
    caches: options.caches,
    unreachable: options.unreachable ?? state.pendingCalls.get(call.requestId)?.unreachable ?? [],
    dialError: options.dialError,
    scans: options.scans,
    fitOnly: options.fitOnly === true,
    explain,
    requirements: [],
    costTables: undefined,
    before: [],
  };
}
