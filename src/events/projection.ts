/** The contract between an event log and the fold it keeps beside it (for snapshots). */
import type { ClusterEvent } from './types.js';

/**
 * A fold the log keeps up to date as it appends, so it can write `Snapshot` events and open a
 * log at its current state from the newest snapshot plus the tail. The log owns the working
 * state and hands it to `apply`, which may update it in place (it is never shared).
 */
export interface LogProjection<S> {
  /** A fresh state before any event. */
  initial(): S;
  /** The state after `event`; may update `state` in place and return it. */
  apply(state: S, event: ClusterEvent): S;
  /** The state after the log's own `Snapshot` of it, at `seq`: unchanged but for its seq. */
  advance(state: S, seq: number): S;
  /** A detached, JSON-safe copy of the state, as a `Snapshot` event carries it. */
  toSnapshot(state: S): Record<string, unknown>;
  /**
   * How many entries of the state grow with traffic rather than with the cluster (remembered
   * calls, sessions): the log takes its next snapshot no sooner than that many events after the
   * last, so a snapshot's cost per event stays bounded (`snapshotDue`). Absent: 0.
   */
  weight?(state: S): number;
}
