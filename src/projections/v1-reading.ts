/**
 * What the v1 -> v2 upcaster (`src/events/upcast.ts`) reads of the state a v1 event meets: the
 * pins and container records the consequences a v1 fold applied depended on, answered by the
 * fold's own rules (liveness, `reconcile.ts`), so a v1 log folds to the state it always did.
 */
import type { V1Reading } from '../events/upcast.js';
import type { ClusterState } from './cluster-state.js';
import { isLive } from './queries.js';
import { isStaleContainerReport, reconcile } from './reconcile.js';

/** The upcaster's reading of a cluster state. */
export const V1_READING: V1Reading<ClusterState> = {
  live: (state, workerId) => {
    const worker = state.workers.get(workerId);
    return worker !== undefined && isLive(worker);
  },
  pinned: (state, workerId) => [...(state.workers.get(workerId)?.pinnedSessions.values() ?? [])],
  pinnedTo: (state, workerId, containerId) =>
    state.workers.get(workerId)?.pinnedSessions.get(containerId),
  staleContainerReport: (state, workerId, containerId, reportSeq) => {
    const worker = state.workers.get(workerId);
    return worker !== undefined && isStaleContainerReport(worker, containerId, reportSeq);
  },
  restarted: (state, workerId, instanceId) => {
    const known = state.workers.get(workerId);
    return (
      known !== undefined &&
      instanceId !== null &&
      known.instanceId !== null &&
      known.instanceId !== instanceId
    );
  },
  dropped: (state, workerId, entries, reportSeq) => {
    const worker = state.workers.get(workerId);
    return worker === undefined ? [] : reconcile(worker, entries, reportSeq).dropped;
  },
  pinCreatedBy: (state, requestId) => {
    const reservation = state.reservations.get(requestId);
    if (reservation === undefined || reservation.sessionId === null) return undefined;
    const session = state.sessions.get(reservation.sessionId);
    return session !== undefined && session.pinnedBy === requestId ? session.sessionId : undefined;
  },
};
