/**
 * Stamping an append (pure): the envelope every backend gives one decision's events, and the
 * `Snapshot` a log appends when one is due. One owner, so the LMDB and JetStream logs stamp alike.
 */
import { validateEvent } from './decode.js';
import { EVENT_SCHEMA_VERSION } from './schema.js';
import type { ClusterEvent, NewEvent } from './types.js';

/**
 * The events of one append with contiguous seqs from `firstSeq`, one `at` and one `cause`, each
 * validated before any is stored: a bad one refuses the whole append.
 */
export function stampEvents(
  list: readonly NewEvent[],
  firstSeq: number,
  at: string,
  cause: string | null,
): ClusterEvent[] {
  return list.map((item, i) => {
    const seq = firstSeq + i;
    // Envelope first, then the author's fields in the author's order (`type` leads them); the
    // envelope is the log's, whatever the author's object also carries.
    const stamped = Object.assign({ seq, at, cause }, item, { seq, at, cause });
    return validateEvent(stamped, { seq });
  });
}

/**
 * Events per entry of a snapshot's weight that the next snapshot waits at least: a call appends
 * about six events and leaves about two entries, so at 1 a snapshot of what calls left behind
 * cost about a third of the log's bytes; at 4 it costs under a tenth, and recovery folds at most
 * four times the snapshot's entries past it.
 */
export const SNAPSHOT_EVENTS_PER_ENTRY = 4;

/**
 * Whether a snapshot is due after `lastSeq`: `every` events after the last one (0: never), and at
 * least `SNAPSHOT_EVENTS_PER_ENTRY` times `spacing` events after it: the weight
 * (`LogProjection.weight`, the entries of the state that grow with traffic) of the state the last
 * snapshot carried, or of the state the log opened at. A snapshot costs in proportion to the state
 * it serialises, so spacing each by the size of the one before keeps their cost per event bounded
 * however much the state remembers; recovery then folds at most that many events past the
 * snapshot it loads.
 */
export function snapshotDue(
  lastSeq: number,
  lastSnapshot: number | undefined,
  firstSeq: number | undefined,
  every: number,
  spacing = 0,
): boolean {
  if (every <= 0) return false;
  const since = lastSnapshot ?? (firstSeq ?? 1) - 1;
  return lastSeq - since >= Math.max(every, spacing * SNAPSHOT_EVENTS_PER_ENTRY);
}

/**
 * The `Snapshot` event at `seq` holding a projection's detached state, with the schema version
 * the state says it holds (the one this code writes, if it says none).
 */
export function snapshotEvent(
  seq: number,
  at: string,
  state: Record<string, unknown>,
): ClusterEvent {
  const schemaVersion =
    typeof state.schemaVersion === 'number' ? state.schemaVersion : EVENT_SCHEMA_VERSION;
  return validateEvent({ seq, at, cause: null, type: 'Snapshot', schemaVersion, state }, { seq });
}
