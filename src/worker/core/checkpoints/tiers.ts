/**
 * A held checkpoint's two residency tiers: `resident` (something of it kept in memory: a
 * template process, or standby containers restored ahead of demand) and `cached` (an image on
 * local disk that restores without anything resident). Pure.
 */

/** Where a held checkpoint lives on this worker. */
export interface CheckpointTiers {
  readonly checkpointId: string;
  readonly resident: boolean;
  readonly cached: boolean;
}

/** The tiers of each held checkpoint, in `held`'s order. */
export function checkpointTiers(
  held: readonly string[],
  isResident: (checkpointId: string) => boolean,
  hasImage: (checkpointId: string) => boolean,
): CheckpointTiers[] {
  return held.map((checkpointId) => ({
    checkpointId,
    resident: isResident(checkpointId),
    cached: hasImage(checkpointId),
  }));
}
