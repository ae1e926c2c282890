/**
 * Standby containers: per held checkpoint, containers restored ahead of demand so that a call
 * naming the checkpoint skips the restore. Which checkpoints keep standbys, how many to restore
 * now, which standby gives its slot up to a call, and which go when the held set changes. Pure:
 * the shelf passes what it holds; it keeps the containers and restores them.
 */

/** What the standby rules read of a shelf. */
export interface StandbyShelfState {
  /** Standbys kept per held checkpoint; 0 turns standbys off. */
  readonly perCheckpoint: number;
  /** The checkpoints that can be restored now. */
  readonly held: readonly string[];
  /** Checkpoints whose standbys were dropped (their resident tier freed): none are kept. */
  readonly dropped: ReadonlySet<string>;
  /** The shelf no longer restocks (its pool closes). */
  readonly closed: boolean;
}

/** Whether standbys of `checkpointId` are kept: standbys are on, it is held and not dropped. */
export function keepsStandbys(shelf: StandbyShelfState, checkpointId: string): boolean {
  return (
    shelf.perCheckpoint > 0 && !shelf.dropped.has(checkpointId) && shelf.held.includes(checkpointId)
  );
}

/**
 * How many standbys of `checkpointId` to start restoring now: up to `wanted` (its target: the
 * count kept, or what demand asks, `standby-demand.ts`), counting the `have` on the shelf or being
 * restored, within `room` free slots and memory (may be Infinity).
 */
export function standbysToRestore(
  shelf: StandbyShelfState,
  checkpointId: string,
  have: number,
  room: number,
  wanted: number = shelf.perCheckpoint,
): number {
  if (shelf.closed || !keepsStandbys(shelf, checkpointId)) return 0;
  return Math.max(0, Math.min(wanted - have, room));
}

/** Whether a standby of `checkpointId` that finished restoring goes on the shelf (else destroyed). */
export function shelvesRestored(shelf: StandbyShelfState, checkpointId: string): boolean {
  return !shelf.closed && keepsStandbys(shelf, checkpointId);
}

/**
 * Which checkpoint's standby gives its slot up to a call of `keep` (`shelved`: standbys on the
 * shelf per checkpoint, oldest shelf first): none when the call takes a standby of its own
 * checkpoint, else one of the first checkpoint that has any; null when none is on the shelf.
 */
export function standbyGivingUp(shelved: ReadonlyMap<string, number>, keep: string): string | null {
  if ((shelved.get(keep) ?? 0) > 0) return null;
  for (const [checkpointId, count] of shelved) if (count > 0) return checkpointId;
  return null;
}

/**
 * After the held set changed: the checkpoints on the shelf whose standbys go (no longer held),
 * and the held checkpoints to restock, in `held`'s order.
 */
export function standbyRefresh(
  shelf: StandbyShelfState,
  shelvedIds: Iterable<string>,
): { readonly drop: readonly string[]; readonly restock: readonly string[] } {
  const held = new Set(shelf.held);
  return {
    drop: [...shelvedIds].filter((checkpointId) => !held.has(checkpointId)),
    restock: [...held],
  };
}
