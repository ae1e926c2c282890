/**
 * Folding many events. `evolve` (immer `produce`) copies every record it touches per event, which
 * costs O(workers) per event on a large cluster; a fold instead runs the same recipe over one
 * private working copy and freezes the result once, so folding a log is linear in its length.
 * `fold(events)` equals `events.reduce(evolve, initialState())` (a property the tests check).
 */
import { freeze, type Draft } from 'immer';
import type { LogProjection } from '../events/projection.js';
import type { ClusterEvent } from '../events/types.js';
import { initialState, type ClusterState } from './cluster-state.js';
import { applyEvent } from './evolve.js';
import { snapshotOf, snapshotWeight } from './snapshot.js';
import type { WorkerChangeSink } from './worker-changes.js';

/** The frozen state after folding `events` over `from` (default: the initial state). */
export function fold(
  events: Iterable<ClusterEvent>,
  from: ClusterState = initialState(),
): ClusterState {
  let state = structuredClone(from) as unknown as Draft<ClusterState>;
  for (const event of events) state = applyEvent(state, event);
  return freeze(state as unknown as ClusterState, true);
}

/**
 * The state after `event`, changing `state` in place (a private working copy: never an immutable
 * state someone else holds); `changes` hears of every worker it changes. Returns the state to go
 * on with: the same object, or a Snapshot's new one.
 */
export function applyInPlace(
  state: ClusterState,
  event: ClusterEvent,
  changes?: WorkerChangeSink,
): ClusterState {
  return applyEvent(state as unknown as Draft<ClusterState>, event, changes);
}

/**
 * The projection an event log keeps beside it: a private, mutable working state updated in place
 * by the same recipe, so appending stays O(1) per event. Readers get it as a read-only
 * `ClusterState` and must not hold it across appends if they need a stable view (copy it).
 */
export const clusterProjection: LogProjection<ClusterState> = {
  initial: initialState,
  apply: (state, event) => applyInPlace(state, event),
  advance: (state, seq) => {
    (state as unknown as Draft<ClusterState>).lastSeq = seq;
    return state;
  },
  toSnapshot: snapshotOf,
  weight: snapshotWeight,
};

/**
 * The same projection, telling `changes` of every worker each appended event changes: how the
 * owner of a derived index (placement's candidates) keeps it in step with the log's state.
 */
export function clusterProjectionTelling(changes: WorkerChangeSink): LogProjection<ClusterState> {
  return {
    ...clusterProjection,
    apply: (state, event) => applyInPlace(state, event, changes),
  };
}
