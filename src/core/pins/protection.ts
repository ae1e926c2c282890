/**
 * Telling workers what to keep (`ResidencyProtected`): after the table, the staged pins, the
 * retained versions or the fleet changed, every live worker whose protected set differs from what
 * it was last told gets its new set. Pure: the time (for `PIN_RETENTION`) is an input.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { isLive } from '../../projections/queries.js';
import type { Decision } from '../decision.js';
import { keptVersions, protectedSets } from './kept-versions.js';
import type { SubsetCache } from '../placement/pinned/subset-cache.js';

/**
 * The event types after which workers' protected sets may have changed: the router decides
 * protection again after any of them (and on every reaper interval, as retained versions expire).
 */
export const CHANGES_PROTECTION: ReadonlySet<NewEvent['type']> = new Set([
  'PinStaged',
  'RoutingRevised',
  'WorkerRegistered',
  'WorkerLeaving',
  'WorkerEvicted',
  'CatalogueLoaded',
  'Snapshot',
]);

/** What a protection decision is given. */
export interface ProtectionInput {
  /** Now, epoch ms (retained versions expire `PIN_RETENTION` after they stopped being pinned). */
  readonly now: number;
  readonly subsets?: SubsetCache | undefined;
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id, index) => id === b[index]);
}

/** The `ResidencyProtected` events that bring every live worker's set up to date (`routing`). */
export function decideProtection(state: ClusterState, input: ProtectionInput): Decision {
  const kept = keptVersions(state.routing, input.now, state.config.PIN_RETENTION);
  const sets = protectedSets(state, kept, input.subsets);
  const events: NewEvent[] = [];
  for (const [workerId, checkpointIds] of sets) {
    const worker = state.workers.get(workerId);
    if (worker === undefined || !isLive(worker)) continue;
    const told = state.routing.workers.get(workerId)?.protectedIds ?? null;
    const changed = told === null ? checkpointIds.length > 0 : !sameIds(told, checkpointIds);
    if (changed) events.push({ type: 'ResidencyProtected', workerId, checkpointIds });
  }
  return { cause: { kind: 'routing' }, events };
}
