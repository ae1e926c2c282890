/**
 * An operator's pin changes as decisions (docs/tenant-routing.md): stage, flip, rollback, set-k,
 * remove. Each checks its input against the state and returns the events to append (`PinStaged`
 * or `RoutingRevised`, caused by `admin:TENANT`) with a summary for the operator, or throws a
 * `PinChangeRefusedError` with its own code and message, having appended nothing. Pure: the time
 * (for what `PIN_RETENTION` still keeps) is an input.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { compareText } from '../../projections/queries.js';
import {
  holdsVersion,
  retainedKey,
  type PinEntry,
  type RoutingState,
} from '../../projections/routing-state.js';
import type { Decision } from '../decision.js';
import { keptOn, keptVersions, type KeptVersion } from './kept-versions.js';
import { PinChangeRefusedError } from './pin-errors.js';
import { describeBudget, fleetBudget } from './resident-budget.js';
import type { SubsetCache } from '../placement/pinned/subset-cache.js';
import { flavorsListing } from '../placement/pinned/version-flavor.js';
import { tenantIdProblem } from '../tenant-id.js';

/** Names that are aliases, never versions: the table names exact checkpoint IDs. */
export const VERSION_ALIASES: readonly string[] = [
  'latest',
  'current',
  'stable',
  'newest',
  'previous',
  'default',
  'head',
];

/** What a pin change did, for the operator. */
export interface PinChangeSummary {
  /** The revision in force after the change. */
  readonly revision: number;
  readonly tenantId: string;
  /** The version staged or now in force; null after a removal. */
  readonly version: string | null;
  readonly k: number | null;
  readonly previousVersion: string | null;
  /** The workers the version is kept on (a stage: those asked to pre-warm). */
  readonly workers: readonly string[];
  readonly notes: readonly string[];
}

/** A pin change's decision: its events and its summary. */
export interface PinChangeDecision extends Decision {
  readonly change: PinChangeSummary;
}

/** What every change is given besides its own fields. */
interface ChangeContext {
  /** Now, epoch ms. */
  readonly now: number;
  readonly subsets?: SubsetCache | undefined;
}

/** Stage `version` for `tenantId` on k workers. */
export interface StageInput extends ChangeContext {
  readonly tenantId: string;
  readonly version: string;
  /** Null: the tenant's current k, or 1. */
  readonly k: number | null;
  readonly force: boolean;
}

/** A change of the entry in force, refused unless `expectRevision` (when given) is current. */
interface EntryChange extends ChangeContext {
  readonly tenantId: string;
  readonly expectRevision: number | null;
}

/** Put the staged version in force. */
export interface FlipInput extends EntryChange {
  readonly force: boolean;
}

/** Go back to the version the current one replaced. */
export type RollbackInput = EntryChange;

/** Change the entry's k. */
export interface SetKInput extends EntryChange {
  readonly k: number;
  readonly force: boolean;
}

/** Remove the tenant's pin. */
export type RemoveInput = EntryChange;

function refuse(
  code: ConstructorParameters<typeof PinChangeRefusedError>[0],
  message: string,
): never {
  throw new PinChangeRefusedError(code, message);
}

function checkTenant(tenantId: string): void {
  const problem = tenantIdProblem(tenantId, 'pin');
  if (problem !== null) refuse('INVALID_ARGUMENT', problem);
}

function checkK(k: number): void {
  if (!Number.isInteger(k) || k < 1) {
    refuse('INVALID_ARGUMENT', `k must be a whole number of workers, at least 1 (got ${k})`);
  }
}

function knownVersions(state: ClusterState): string[] {
  const ids = new Set<string>();
  for (const flavor of Object.values(state.catalogue?.catalogue.flavors ?? {})) {
    for (const checkpoint of flavor.checkpoints) ids.add(checkpoint.id);
  }
  return [...ids].sort(compareText);
}

function checkVersion(state: ClusterState, version: string): void {
  if (version === '') refuse('INVALID_ARGUMENT', 'a pin needs a version (--version)');
  const known = knownVersions(state);
  if (VERSION_ALIASES.includes(version.toLowerCase())) {
    refuse(
      'INVALID_ARGUMENT',
      `"${version}" is an alias, not a version: name an exact checkpoint ID of the catalogue (known: ${known.join(', ') || 'none'})`,
    );
  }
  if (flavorsListing(state.catalogue, version).length === 0) {
    refuse(
      'NOT_FOUND',
      state.catalogue
        ? `version "${version}" is not in the catalogue in force (revision ${state.catalogue.revision}; known: ${known.join(', ') || 'none'})`
        : `version "${version}" is not in any catalogue: the router has none loaded (start it with --catalogue)`,
    );
  }
}

function checkRevision(routing: RoutingState, expected: number | null): void {
  if (expected !== null && expected !== routing.revision) {
    refuse(
      'FAILED_PRECONDITION',
      `the routing table is at revision ${routing.revision}, not ${expected}: someone changed it since; look again with readie pin status`,
    );
  }
}

function entryOf(routing: RoutingState, tenantId: string): PinEntry {
  const entry = routing.entries.get(tenantId);
  if (entry === undefined) {
    refuse(
      'NOT_FOUND',
      `tenant ${tenantId} has no pinned version${routing.staged.has(tenantId) ? ' (it has one staged: flip it)' : ''}`,
    );
  }
  return entry;
}

/** The versions the router would keep with `entry` (or the staged pin) changed as given. */
function keptWith(
  state: ClusterState,
  now: number,
  change: (kept: KeptVersion[]) => KeptVersion[],
): KeptVersion[] {
  return change(keptVersions(state.routing, now, state.config.PIN_RETENTION));
}

/** Refuses (unless forced) when the table would not fit the fleet's resident memory. */
function checkFit(
  state: ClusterState,
  kept: readonly KeptVersion[],
  force: boolean,
  subsets: SubsetCache | undefined,
  notes: string[],
): void {
  const budget = fleetBudget(state, kept, subsets);
  const words = describeBudget(budget);
  if (budget.fits) {
    notes.push(`fits: ${words}`);
    return;
  }
  if (!force) {
    refuse(
      'RESOURCE_EXHAUSTED',
      `the table would not fit the fleet: ${words}; lower k, add workers or resident memory, or pass --force`,
    );
  }
  notes.push(`does not fit (forced): ${words}`);
}

function revised(
  state: ClusterState,
  tenantId: string,
  version: string | null,
  k: number | null,
  previousVersion: string | null,
): NewEvent {
  return {
    type: 'RoutingRevised',
    revision: state.routing.revision + 1,
    tenantId,
    version,
    k,
    previousVersion,
  };
}

function decision(
  tenantId: string,
  events: NewEvent[],
  change: PinChangeSummary,
): PinChangeDecision {
  return { cause: { kind: 'admin', tenantId }, events, change };
}

/**
 * The note of a pin whose k is more than the workers that can hold its version (its subset is
 * then every one of them): what it is really kept on, and that workers joining later join it.
 */
function fleetNote(k: number, workers: readonly string[], version: string, notes: string[]): void {
  if (workers.length === 0 || workers.length >= k) return;
  const count = `${workers.length} worker${workers.length === 1 ? '' : 's'}`;
  notes.push(
    `k is ${k}, but only ${count} can hold "${version}" now: it is kept on ${[...workers].sort(compareText).join(', ')}; a worker that joins later joins its subset`,
  );
}

/** `readie pin stage`: `PinStaged`, on the subset the pin will hash to. */
export function decideStage(state: ClusterState, input: StageInput): PinChangeDecision {
  const { tenantId, version, force, now, subsets } = input;
  checkTenant(tenantId);
  checkVersion(state, version);
  const current = state.routing.entries.get(tenantId);
  const k = input.k ?? current?.k ?? 1;
  checkK(k);
  const staged: KeptVersion = { tenantId, version, k, reason: 'staged', alsoOn: [] };
  const kept = keptWith(state, now, (all) => [
    ...all.filter((entry) => !(entry.reason === 'staged' && entry.tenantId === tenantId)),
    staged,
  ]);
  const notes: string[] = [];
  checkFit(state, kept, force, subsets, notes);
  const targetWorkers = keptOn(state, staged, subsets).sort(compareText);
  if (targetWorkers.length === 0)
    notes.push('no worker lists this version now: nothing to pre-warm');
  fleetNote(k, targetWorkers, version, notes);
  if (current?.version === version) {
    notes.push(`version "${version}" is already tenant ${tenantId}'s pin: a flip changes only k`);
  }
  return decision(tenantId, [{ type: 'PinStaged', tenantId, version, k, targetWorkers }], {
    revision: state.routing.revision,
    tenantId,
    version,
    k,
    previousVersion: current?.version ?? null,
    workers: targetWorkers,
    notes,
  });
}

/** The members of a version's subsets (every flavor listing it) that do not hold it. */
function notHolding(
  state: ClusterState,
  tenantId: string,
  version: string,
  k: number,
  subsets: SubsetCache | undefined,
): { members: string[]; missing: string[] } {
  const members = keptOn(state, { tenantId, version, k, reason: 'pinned', alsoOn: [] }, subsets);
  const missing = members.filter((workerId) => !holdsVersion(state.routing, workerId, version));
  return { members, missing };
}

function describeMissing(state: ClusterState, version: string, missing: readonly string[]): string {
  return missing
    .map((workerId) => {
      const state_ = state.routing.workers.get(workerId)?.versions.get(version);
      return `${workerId} (${state_ ? state_.state + (state_.error ? `: ${state_.error}` : '') : 'nothing reported'})`;
    })
    .join(', ');
}

/** `readie pin flip`: the staged version in force (`RoutingRevised`). */
export function decideFlip(state: ClusterState, input: FlipInput): PinChangeDecision {
  const { tenantId, force, subsets } = input;
  checkTenant(tenantId);
  const { routing } = state;
  checkRevision(routing, input.expectRevision);
  const current = routing.entries.get(tenantId);
  const staged = routing.staged.get(tenantId);
  if (staged === undefined) {
    refuse(
      current === undefined ? 'NOT_FOUND' : 'FAILED_PRECONDITION',
      current === undefined
        ? `tenant ${tenantId} has no pinned version and nothing staged: stage a version first (readie pin stage)`
        : `tenant ${tenantId} has nothing staged to flip to (its pin is "${current.version}"): stage a version first`,
    );
  }
  checkVersion(state, staged.version);
  const notes: string[] = [];
  const { members, missing } = notHolding(state, tenantId, staged.version, staged.k, subsets);
  if (members.length === 0) notes.push('no worker can hold this version now');
  fleetNote(staged.k, members, staged.version, notes);
  if (missing.length > 0) {
    const words = `version "${staged.version}" is not resident on its whole subset: ${describeMissing(state, staged.version, missing)}`;
    if (!force) {
      refuse(
        'FAILED_PRECONDITION',
        `${words}; wait for the pre-warm (readie pin status), or pass --force (those calls then cold-load)`,
      );
    }
    notes.push(`forced: ${words}`);
  }
  const previousVersion =
    current === undefined
      ? null
      : current.version === staged.version
        ? current.previousVersion
        : current.version;
  const event = revised(state, tenantId, staged.version, staged.k, previousVersion);
  if (previousVersion !== null && previousVersion !== staged.version) {
    notes.push(
      `"${previousVersion}" stays protected for PIN_RETENTION; calls placed on it before the flip finish there`,
    );
  }
  return decision(tenantId, [event], {
    revision: routing.revision + 1,
    tenantId,
    version: staged.version,
    k: staged.k,
    previousVersion,
    workers: members.sort(compareText),
    notes,
  });
}

/** `readie pin rollback`: back to the version the current one replaced (`RoutingRevised`). */
export function decideRollback(state: ClusterState, input: RollbackInput): PinChangeDecision {
  const { tenantId, subsets, now } = input;
  checkTenant(tenantId);
  const { routing } = state;
  checkRevision(routing, input.expectRevision);
  const entry = entryOf(routing, tenantId);
  const target = entry.previousVersion;
  if (target === null) {
    refuse(
      'FAILED_PRECONDITION',
      `tenant ${tenantId}'s pin "${entry.version}" replaced no other version: there is nothing to roll back to`,
    );
  }
  checkVersion(state, target);
  const notes: string[] = [];
  const retained = routing.retained.get(retainedKey(tenantId, target));
  const kept =
    retained !== undefined && Date.parse(retained.since) + state.config.PIN_RETENTION > now;
  if (!kept)
    notes.push(
      `"${target}" is past PIN_RETENTION: workers may have evicted it (calls then cold-load)`,
    );
  const { members, missing } = notHolding(state, tenantId, target, entry.k, subsets);
  fleetNote(entry.k, members, target, notes);
  if (missing.length > 0) {
    notes.push(`not resident on ${describeMissing(state, target, missing)}: calls there cold-load`);
  }
  return decision(tenantId, [revised(state, tenantId, target, entry.k, entry.version)], {
    revision: routing.revision + 1,
    tenantId,
    version: target,
    k: entry.k,
    previousVersion: entry.version,
    workers: members.sort(compareText),
    notes,
  });
}

/** `readie pin set-k`: the entry on k workers (`RoutingRevised`, same version). */
export function decideSetK(state: ClusterState, input: SetKInput): PinChangeDecision {
  const { tenantId, k, force, now, subsets } = input;
  checkTenant(tenantId);
  checkK(k);
  const { routing } = state;
  checkRevision(routing, input.expectRevision);
  const entry = entryOf(routing, tenantId);
  const notes: string[] = [];
  if (k === entry.k) {
    notes.push(`k is already ${k}: nothing changed`);
    const members = keptOn(state, { ...entry, reason: 'pinned', alsoOn: [] }, subsets);
    return decision(tenantId, [], {
      revision: routing.revision,
      tenantId,
      version: entry.version,
      k,
      previousVersion: entry.previousVersion,
      workers: members.sort(compareText),
      notes,
    });
  }
  const changed: KeptVersion = {
    tenantId,
    version: entry.version,
    k,
    reason: 'pinned',
    alsoOn: [],
  };
  const kept = keptWith(state, now, (all) => [
    ...all.filter((version) => !(version.reason === 'pinned' && version.tenantId === tenantId)),
    changed,
  ]);
  checkFit(state, kept, force, subsets, notes);
  const members = keptOn(state, changed, subsets).sort(compareText);
  fleetNote(k, members, entry.version, notes);
  return decision(tenantId, [revised(state, tenantId, entry.version, k, entry.previousVersion)], {
    revision: routing.revision + 1,
    tenantId,
    version: entry.version,
    k,
    previousVersion: entry.previousVersion,
    workers: members,
    notes,
  });
}

/** `readie pin remove`: the tenant has no pin from here on (`RoutingRevised`, no version). */
export function decideRemove(state: ClusterState, input: RemoveInput): PinChangeDecision {
  const { tenantId } = input;
  checkTenant(tenantId);
  const { routing } = state;
  const entry = routing.entries.get(tenantId);
  const staged = routing.staged.get(tenantId);
  if (entry === undefined && staged === undefined) {
    refuse(
      'NOT_FOUND',
      `tenant ${tenantId} has no pinned version and nothing staged: nothing to remove`,
    );
  }
  checkRevision(routing, input.expectRevision);
  const notes = [
    `tenant ${tenantId}'s pinned calls are refused until it is pinned again` +
      (entry ? `; "${entry.version}" stays protected for PIN_RETENTION` : ''),
  ];
  return decision(tenantId, [revised(state, tenantId, null, null, entry?.version ?? null)], {
    revision: routing.revision + 1,
    tenantId,
    version: null,
    k: null,
    previousVersion: entry?.version ?? null,
    workers: [],
    notes,
  });
}
