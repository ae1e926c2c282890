/**
 * Placement: a pure function of (cluster state, call, config) returning the events to append and
 * the outcome, in the order of the rules in docs/placement.md. `place` is the hot path (with the
 * caller's `PlacementCaches`, a walk of the candidates best first; without, one full walk);
 * `explainPlacement` runs the very same steps while recording why.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { decidePinned } from './pinned/place-pinned.js';
import { requestInUseMessage } from '../errors.js';
import { retryProblem } from './retry-check.js';
import { budgetOf, sessionIdOf, type Budget, type CallToPlace } from './call.js';
import { cheapest, costTable, flavorCatalogue } from './checkpoints.js';
import type { PlacementDecision } from './decision.js';
import { ExplanationBuilder, type PlacementExplanation } from './explanation.js';
import { FILTERS } from './filters/index.js';
import { rejected, reserve } from './outcome.js';
import { checkPackages } from './packages.js';
import { foreignRequest } from './request-owner.js';
import type { PlacementCaches } from './placement-caches.js';
import { explainScan, scanAll, scanInRankOrder, type ScanResult } from './scan.js';
import { sessionAffinity } from './session-affinity.js';

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
}

/** Decides where `call` runs, against `state`. */
export function place(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions = {},
): PlacementDecision {
  return decide(state, call, options, undefined);
}

/** Decides like `place` and explains why, worker by worker. */
export function explainPlacement(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions = {},
): PlacementExplanation {
  const config = options.config ?? state.config;
  const budget = budgetOf(call.demand, config);
  const explanation = new ExplanationBuilder(budget, config);
  const decision = decide(state, call, options, explanation);
  return explanation.build(call.requestId, sessionIdOf(call.sessionId), decision);
}

function decide(
  state: ClusterState,
  call: CallToPlace,
  options: PlaceOptions,
  explain: ExplanationBuilder | undefined,
): PlacementDecision {
  const config = options.config ?? state.config;
  const caches = options.caches;
  const { demand } = call;
  const sessionId = sessionIdOf(call.sessionId);
  const budget = budgetOf(demand, config);
  const before: NewEvent[] = [];
  // Workers earlier attempts of this call could not reach (its stream could not be opened).
  const unreachable =
    options.unreachable ?? state.pendingCalls.get(call.requestId)?.unreachable ?? [];

  // The request ID: another tenant's, while the router remembers it, is not this call's to use.
  const foreign = foreignRequest(state, call);
  if (foreign !== null) {
    const message = requestInUseMessage(call.requestId);
    return rejected(call, before, 'ALREADY_EXISTS', message, undefined, foreign);
  }

  // The demand itself: valid packages, no contradiction.
  const checked = checkPackages(demand.packages, caches?.requirements);
  if (!checked.ok) {
    const message = `package entry "${checked.entry}" is not a valid PEP 508 requirement: ${checked.problem}`;
    explain?.packages({ requested: demand.packages ?? [], problem: message });
    return rejected(call, before, 'INVALID_ARGUMENT', message);
  }
  explain?.packages({ requested: demand.packages ?? [], duplicates: checked.duplicates });
  const pinnedCheckpoint = demand.checkpointId ?? '';
  if (pinnedCheckpoint !== '' && demand.disableOptimizedExecution === true) {
    return rejected(
      call,
      before,
      'INVALID_ARGUMENT',
      `checkpoint_id "${pinnedCheckpoint}" and disable_optimized_execution contradict each other`,
    );
  }

  // A tenant's pinned version is routed by its own rules (docs/tenant-routing.md).
  if (demand.pinned === true) {
    return decidePinned(state, call, {
      config,
      budget,
      requirements: checked.requirements,
      subsets: caches?.subsets,
      unreachable,
      dialError: options.dialError,
      explain,
    });
  }
  const retry = retryProblem(state, call);
  if (retry !== null) return rejected(call, before, 'PERMISSION_DENIED', retry);

  // Rule 1: session affinity.
  if (sessionId !== null) {
    const affinity = sessionAffinity(state, sessionId, demand, unreachable, call.tenantId);
    explain?.session(sessionId, affinity.kind === 'reject' ? affinity.message : affinity.verdict);
    switch (affinity.kind) {
      case 'reject':
        return rejected(call, before, affinity.code, affinity.message, undefined, affinity.foreign);
      case 'reuse':
        return reserve(
          call,
          before,
          budget,
          affinity.worker,
          checked.requirements,
          state,
          { containerId: affinity.pin.containerId, checkpointId: affinity.pin.checkpointId },
          explain,
        );
      case 'drop-pin':
        before.push({ type: 'SessionUnpinned', sessionId, reason: 'container_unavailable' });
        break;
      case 'new':
        break;
    }
  }

  // Rules 2 to 4: candidates, filters, ranking.
  const { best, candidates, failures } = scan(state, budget, config, caches, explain, unreachable);
  if (candidates === 0) {
    const message =
      unreachable.length === 0
        ? 'no workers available'
        : `no workers available: the router could not reach ${unreachable.join(', ')} for this call` +
          (options.dialError === undefined ? '' : ` (${options.dialError})`);
    return rejected(call, before, 'UNAVAILABLE', message);
  }
  if (!best) {
    const ruledOut = FILTERS.map((filter, i) => [filter.name, failures[i] ?? 0] as const)
      .filter(([, count]) => count > 0)
      .map(([name, count]) => `${name} ruled out ${count}`)
      .join(', ');
    return rejected(
      call,
      before,
      'RESOURCE_EXHAUSTED',
      `no worker can accept this request (${candidates} candidate${candidates === 1 ? '' : 's'}: ${ruledOut})`,
    );
  }

  // Rule 5: the checkpoint of the new container.
  const checkpoint = chooseCheckpoint(state, best, call, explain);
  if (!checkpoint.ok) return rejected(call, before, 'INVALID_ARGUMENT', checkpoint.message);

  // Rules 6 and 7: packages, and the reservation in the same step.
  return reserve(
    call,
    before,
    budget,
    best,
    checked.requirements,
    state,
    {
      containerId: null,
      checkpointId: checkpoint.checkpointId,
    },
    explain,
  );
}

/**
 * Rules 2 to 4 by the fastest walk the caller allows (every walk gives the same answer). A call
 * placed again after a failed dial leaves out the workers it could not reach, walking them all.
 */
function scan(
  state: ClusterState,
  budget: Budget,
  config: Config,
  caches: PlacementCaches | undefined,
  explain: ExplanationBuilder | undefined,
  unreachable: readonly string[],
): ScanResult {
  if (explain) return explainScan(state.workers.values(), budget, config, explain, unreachable);
  if (caches && unreachable.length === 0) {
    return scanInRankOrder(caches.candidates.candidates(state.workers), budget, config);
  }
  return scanAll(state.workers.values(), budget, config, unreachable);
}

type CheckpointChoice = { ok: true; checkpointId: string | null } | { ok: false; message: string };

/** Records a checkpoint choice in the explanation being built. */
type RecordCheckpoint = (
  chosen: string | null,
  reason: string,
  rows?: ReturnType<typeof costTable>,
) => void;

/** The recorder of a placement nobody explains. */
const RECORD_NOTHING: RecordCheckpoint = () => undefined;

/** Rule 5: the checkpoint for a new container on `worker`. */
function chooseCheckpoint(
  state: ClusterState,
  worker: WorkerRecord,
  call: CallToPlace,
  explain: ExplanationBuilder | undefined,
): CheckpointChoice {
  const { demand } = call;
  const catalogue = state.catalogue;
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
  const rows = costTable(catalogue.catalogue, flavor, demand.imports);
  const winner = cheapest(rows);
  const chosen = winner?.checkpointId ?? null;
  record(chosen, chosen === null ? 'a cold start is cheapest' : `"${chosen}" is cheapest`, rows);
  return { ok: true, checkpointId: chosen };
}
