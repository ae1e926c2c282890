/**
 * Upcasting: reading events written under an older schema version as the current one, so old logs
 * stay replayable and fold to the state they always did. One step per version:
 *
 * - v1 -> v2 (`v1Consequences`). A v1 fold applied some consequences of a cause itself: an
 *   eviction (or a new process's registration) expired the sessions pinned to the worker's
 *   containers, a container removed (alone, or left out of a full report) or forgotten expired its
 *   session, and a failed call (or a force-released reservation) cleared the session pin it had
 *   created. v1 routers also appended those consequences, but not every log holds them all (a log
 *   in the documented vocabulary may hold the cause alone, and a recorder wrote what its fold
 *   implied). From v2 every consequence is an event of the log (`src/core/consequences`) and a
 *   fold applies events only; so a fold reads each v1 event as itself followed by the
 *   consequences a v1 fold applied with it, decided on the state the event met, stamped with the
 *   event's own envelope (its seq and time are when those sessions ended). A logged consequence
 *   that follows then finds the work done, as it always did.
 *
 * Which events are v1: those folded before any `RouterStarted` that records `schemaVersion` 2 or
 * later (a router records the schema it writes; a log, a snapshot or a test history that never
 * says is v1), the fold's state keeping the version in force (`ClusterState.schemaVersion`).
 * Logs from a version above `EVENT_SCHEMA_VERSION` are refused.
 */
import { EventLogError } from './errors.js';
import { EVENT_SCHEMA_VERSION } from './schema.js';
import type { ClusterEvent, EventOf, NewEvent } from './types.js';

/** Raw event objects of a log written under `version`, brought to the current version. */
export function upcaster(version: number): (raw: unknown) => unknown {
  if (!Number.isInteger(version) || version < 1) {
    throw new EventLogError(`schema version ${String(version)} is not a version`);
  }
  if (version > EVENT_SCHEMA_VERSION) {
    throw new EventLogError(
      `the log was written with event schema v${version}; this readie reads up to v${EVENT_SCHEMA_VERSION}`,
    );
  }
  return (raw) => raw;
}

/** The first schema version whose logs hold every consequence as an event. */
export const CONSEQUENCES_LOGGED = 2;

/** The schema version of the events after a `RouterStarted` (one that records none: v1). */
export function schemaVersionOf(event: { readonly schemaVersion: number | null }): number {
  return event.schemaVersion ?? 1;
}

/** The containers a full report lists. */
type ContainerEntries = NonNullable<EventOf<'WorkerUtilization'>['containers']>;

/**
 * What the v1 -> v2 step reads of the state a v1 event met: the pins and records a v1 fold's
 * consequences depended on. The fold answers from its state (`src/projections/v1-reading.ts`);
 * `S` is that state.
 */
export interface V1Reading<S> {
  /** Whether `workerId` is known and live (events about any other worker change nothing). */
  live(state: S, workerId: string): boolean;
  /** The sessions pinned to containers of `workerId`, in the order they were pinned there. */
  pinned(state: S, workerId: string): readonly string[];
  /** The session pinned to `containerId` of `workerId`, if any. */
  pinnedTo(state: S, workerId: string, containerId: string): string | undefined;
  /** Whether a container report about `workerId` is out of date (it changes nothing). */
  staleContainerReport(
    state: S,
    workerId: string,
    containerId: string,
    reportSeq: number | null,
  ): boolean;
  /** Whether a registration naming `instanceId` comes from a new process of known `workerId`. */
  restarted(state: S, workerId: string, instanceId: string | null): boolean;
  /** The records a full report of known `workerId` drops, in record order (none if stale). */
  dropped(
    state: S,
    workerId: string,
    entries: ContainerEntries,
    reportSeq: number | null,
  ): readonly string[];
  /** The session whose pin the held reservation `requestId` created, if any. */
  pinCreatedBy(state: S, requestId: string): string | undefined;
}

const NONE: readonly NewEvent[] = [];

function expired(
  sessionIds: readonly string[],
  reason: 'worker_evicted' | 'container_removed' | 'container_forgotten',
): NewEvent[] {
  return sessionIds.map((sessionId) => ({
    type: 'SessionExpired',
    sessionId,
    reason,
    causeSeq: null,
  }));
}

/** The sessions pinned to `containerIds` of `workerId`, in that order. */
function pinnedToAll<S>(
  reading: V1Reading<S>,
  state: S,
  workerId: string,
  containerIds: readonly string[],
): string[] {
  const sessions: string[] = [];
  for (const containerId of containerIds) {
    const sessionId = reading.pinnedTo(state, workerId, containerId);
    if (sessionId !== undefined) sessions.push(sessionId);
  }
  return sessions;
}

/**
 * The consequences a v1 fold applied with `event`, as v2 events in the order it applied them,
 * read from `state`, the state before `event`. Empty for every event that implied none.
 */
export function v1Consequences<S>(
  event: ClusterEvent,
  state: S,
  reading: V1Reading<S>,
): readonly NewEvent[] {
  switch (event.type) {
    case 'WorkerEvicted':
      if (!reading.live(state, event.workerId)) return NONE;
      return expired(reading.pinned(state, event.workerId), 'worker_evicted');
    case 'WorkerRegistered': {
      const { workerId } = event;
      // A new process: a live one's containers end with their sessions, and the report (its
      // containers replace the old ones') drops none of the old.
      if (reading.restarted(state, workerId, event.instanceId)) {
        if (!reading.live(state, workerId)) return NONE;
        return expired(reading.pinned(state, workerId), 'worker_evicted');
      }
      if (event.containers === null) return NONE;
      const dropped = reading.dropped(state, workerId, event.containers, event.reportSeq);
      return expired(pinnedToAll(reading, state, workerId, dropped), 'container_removed');
    }
    case 'WorkerUtilization': {
      const { workerId } = event;
      if (event.containers === null || !reading.live(state, workerId)) return NONE;
      const dropped = reading.dropped(state, workerId, event.containers, event.reportSeq);
      return expired(pinnedToAll(reading, state, workerId, dropped), 'container_removed');
    }
    case 'ContainerStateChanged': {
      const { workerId, containerId } = event;
      if (event.state !== 'removed' || !reading.live(state, workerId)) return NONE;
      if (reading.staleContainerReport(state, workerId, containerId, event.reportSeq)) return NONE;
      return expired(pinnedToAll(reading, state, workerId, [containerId]), 'container_removed');
    }
    case 'ContainerForgotten': {
      const { workerId, containerId } = event;
      if (!reading.live(state, workerId)) return NONE;
      return expired(pinnedToAll(reading, state, workerId, [containerId]), 'container_forgotten');
    }
    case 'CallFinished':
    case 'ReservationExpired': {
      if (event.type === 'CallFinished' && event.ok) return NONE;
      const sessionId = reading.pinCreatedBy(state, event.requestId);
      if (sessionId === undefined) return NONE;
      const reason = event.type === 'CallFinished' ? 'call_failed' : 'reservation_expired';
      return [{ type: 'SessionUnpinned', sessionId, reason }];
    }
    default:
      return NONE;
  }
}
