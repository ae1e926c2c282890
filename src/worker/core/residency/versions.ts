/**
 * The versions a worker holds (docs/tenant-routing.md), as a value: each catalogue checkpoint's
 * reported state (`loading`, `resident`, `cached`, `evicted`, `failed`) and when a call last used
 * it, the set the router said to keep (the newest `seq` wins) and the calls running on each. Its
 * changes are folded by `evolveVersions(versions, change, now)`; the rules read it: whether a
 * version is resident now, what a load must evict (least recently used among the versions not
 * protected, not in use and not loading), what a change of the backend's held set reports. The
 * worker's residency shell holds the value, builds and drops checkpoints, and reports. Pure.
 */
import type { ResidencyState } from '../../../events/schema.js';
import { planLoad, type EvictionPlan, type HeldVersion } from './eviction-plan.js';

/** One version's record. */
export interface VersionEntry {
  readonly state: ResidencyState;
  /** Why it failed, for `failed`; else null. */
  readonly error: string | null;
  /** When a call last used it (or it was first recorded), epoch ms. */
  readonly lastUsed: number;
}

/** The worker's versions. */
export interface Versions {
  readonly entries: ReadonlyMap<string, VersionEntry>;
  /** The versions the router said to keep. */
  readonly protectedIds: ReadonlySet<string>;
  /** The `seq` of the router's set in force; -1 before the first. */
  readonly protectSeq: number;
  /** Running calls per version (a version is never evicted while counted). */
  readonly users: ReadonlyMap<string, number>;
}

/** One version's state as the worker reports it. */
export interface VersionState {
  readonly checkpointId: string;
  readonly state: ResidencyState;
  readonly error: string | null;
}

/** A change to the worker's versions. */
export type VersionChange =
  /** A version's new state (an entry is made for a version not recorded yet). */
  | {
      readonly type: 'state';
      readonly checkpointId: string;
      readonly state: ResidencyState;
      readonly error: string | null;
    }
  /** A call of the version starts: counted until it ends, and the version was used now. */
  | { readonly type: 'call-started'; readonly checkpointId: string }
  /** A call of the version ended. */
  | { readonly type: 'call-ended'; readonly checkpointId: string }
  /** A call found the version resident. */
  | { readonly type: 'used'; readonly checkpointId: string }
  /** The router's set of versions to keep; an older one (by `seq`) changes nothing. */
  | { readonly type: 'protected'; readonly checkpointIds: readonly string[]; readonly seq: number };

/** The backend's tiers as a change of its held set is read against. */
export interface BackendTiers {
  /** The checkpoints that can be restored now. */
  readonly held: ReadonlySet<string>;
  /** Whether an image of the checkpoint is on local disk. */
  hasImage(checkpointId: string): boolean;
  /** Whether something of the checkpoint is kept in memory (a template). */
  isResident(checkpointId: string): boolean;
}

function assertNever(change: never): never {
  throw new Error(`unknown version change ${JSON.stringify(change)}`);
}

/** The versions at start: every held checkpoint that the worker's catalogue lists is resident. */
export function startingVersions(
  held: readonly string[],
  catalogue: Pick<ReadonlySet<string>, 'has'>,
  now: number,
): Versions {
  const entries = new Map<string, VersionEntry>();
  for (const checkpointId of held) {
    if (catalogue.has(checkpointId)) {
      entries.set(checkpointId, { state: 'resident', error: null, lastUsed: now });
    }
  }
  return { entries, protectedIds: new Set(), protectSeq: -1, users: new Map() };
}

function withEntry(
  versions: Versions,
  checkpointId: string,
  change: (entry: VersionEntry | undefined) => VersionEntry | undefined,
): ReadonlyMap<string, VersionEntry> {
  const before = versions.entries.get(checkpointId);
  const after = change(before);
  if (after === before || after === undefined) return versions.entries;
  return new Map(versions.entries).set(checkpointId, after);
}

function withUsers(
  versions: Versions,
  checkpointId: string,
  delta: number,
): ReadonlyMap<string, number> {
  const users = new Map(versions.users);
  const count = (users.get(checkpointId) ?? (delta < 0 ? 1 : 0)) + delta;
  if (count <= 0) users.delete(checkpointId);
  else users.set(checkpointId, count);
  return users;
}

/** The versions after `change`, at `now` (epoch ms). */
export function evolveVersions(versions: Versions, change: VersionChange, now: number): Versions {
  switch (change.type) {
    case 'state':
      return {
        ...versions,
        entries: withEntry(versions, change.checkpointId, (entry) => ({
          state: change.state,
          error: change.error,
          lastUsed: entry?.lastUsed ?? now,
        })),
      };
    case 'call-started':
      return {
        ...versions,
        users: withUsers(versions, change.checkpointId, 1),
        entries: withEntry(
          versions,
          change.checkpointId,
          (entry) => entry && { ...entry, lastUsed: now },
        ),
      };
    case 'call-ended':
      return {
        ...versions,
        users: withUsers(versions, change.checkpointId, -1),
        entries: withEntry(
          versions,
          change.checkpointId,
          (entry) => entry && { ...entry, lastUsed: now },
        ),
      };
    case 'used':
      return {
        ...versions,
        entries: withEntry(
          versions,
          change.checkpointId,
          (entry) => entry && { ...entry, lastUsed: now },
        ),
      };
    case 'protected':
      if (!acceptsProtection(versions, change.seq)) return versions;
      return { ...versions, protectedIds: new Set(change.checkpointIds), protectSeq: change.seq };
  }
  return assertNever(change);
}

/** Whether the router's set numbered `seq` replaces the one in force (an older one never does). */
export function acceptsProtection(versions: Versions, seq: number): boolean {
  return seq >= versions.protectSeq;
}

/** Whether the version is resident now: reported resident, and the backend still holds it. */
export function isResidentNow(
  versions: Versions,
  checkpointId: string,
  held: readonly string[],
): boolean {
  return versions.entries.get(checkpointId)?.state === 'resident' && held.includes(checkpointId);
}

/** Every version with a state, by ID: the full report after a registration. */
export function reportedVersions(versions: Versions): VersionState[] {
  return [...versions.entries]
    .map(([checkpointId, entry]) => ({ checkpointId, state: entry.state, error: entry.error }))
    .sort((a, b) =>
      a.checkpointId < b.checkpointId ? -1 : a.checkpointId > b.checkpointId ? 1 : 0,
    );
}

/** The versions resident or loading, as a load's eviction plan weighs them. */
export function heldVersions(
  versions: Versions,
  bytesOf: (checkpointId: string) => number,
): HeldVersion[] {
  return [...versions.entries]
    .filter(([, entry]) => entry.state === 'resident' || entry.state === 'loading')
    .map(([checkpointId, entry]) => ({
      checkpointId,
      bytes: bytesOf(checkpointId),
      lastUsed: entry.lastUsed,
      protected: versions.protectedIds.has(checkpointId),
      inUse: (versions.users.get(checkpointId) ?? 0) > 0,
      loading: entry.state === 'loading',
    }));
}

/**
 * What loading `checkpointId` must evict first to stay within `budget` bytes (null: no budget),
 * or why it cannot be loaded; `bytesOf` gives each version's resident cost.
 */
export function planVersionLoad(
  versions: Versions,
  checkpointId: string,
  budget: number | null,
  bytesOf: (checkpointId: string) => number,
): EvictionPlan {
  return planLoad(budget, checkpointId, bytesOf(checkpointId), heldVersions(versions, bytesOf));
}

/** What an evicted version is reported as: `cached` when its image stays on disk. */
export function evictedState(hasImage: boolean): ResidencyState {
  return hasImage ? 'cached' : 'evicted';
}

/**
 * The reports a change of the backend's held set makes (a template died, an image was
 * discarded, one was rebuilt): a resident version no longer held is cached or evicted; a cached or
 * evicted one held again with its resident tier back is resident. In the versions' order.
 */
export function backendChanges(
  versions: Versions,
  backend: BackendTiers,
): { readonly checkpointId: string; readonly state: ResidencyState }[] {
  const changes: { checkpointId: string; state: ResidencyState }[] = [];
  for (const [checkpointId, entry] of versions.entries) {
    if (entry.state === 'resident' && !backend.held.has(checkpointId)) {
      changes.push({ checkpointId, state: evictedState(backend.hasImage(checkpointId)) });
    } else if (
      (entry.state === 'evicted' || entry.state === 'cached') &&
      backend.held.has(checkpointId) &&
      backend.isResident(checkpointId)
    ) {
      changes.push({ checkpointId, state: 'resident' });
    }
  }
  return changes;
}
