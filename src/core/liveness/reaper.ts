/**
 * The reaper: a pure function of (state, now, config) returning the events to append. A timer in
 * the shell calls it every `REAPER_INTERVAL`. It
 * - evicts workers not heard from for more than `WORKER_TTL`, counting silence from no earlier than
 *   the router's own start (a router that was down does not evict every worker on restart);
 * - forgets container records the worker never reported removed: an idle one (`ready`) after
 *   `EXECUTOR_TTL` plus one `WORKER_UTILIZATION_INTERVAL` (`unreported`; the worker owns
 *   `EXECUTOR_TTL`: it destroys an idle container at that age and reports it removed, so the sweep
 *   only catches a report that never came), and one in `error` after `EXECUTOR_ERROR_TTL`, unless a
 *   call in flight holds them;
 * - force-releases reservations older than twice `EXECUTION_TIMEOUT` (their call is long dead).
 * Every cause comes with its consequences; nothing is evicted, forgotten or released twice.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import { isLive } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import {
  evictionEvents,
  forgetContainerEvents,
  reservationExpiredEvents,
  seqAfter,
} from '../consequences/index.js';
import type { Decision } from '../decision.js';

/** Epoch milliseconds of an event timestamp. */
function epochOf(at: string): number {
  return Date.parse(at);
}

/** When a worker's silence started: its last report, or the router's start if that is later. */
export function silentSince(state: ClusterState, worker: WorkerRecord): number {
  const heard = epochOf(worker.lastHeardAt);
  const started = state.routerStartedAt === null ? heard : epochOf(state.routerStartedAt);
  return Math.max(heard, started);
}

/**
 * Workers silent for more than `WORKER_TTL`: evicted (`left` if they had said they were leaving),
 * appended to `events` (the pass's events so far).
 */
function evictSilentWorkers(
  state: ClusterState,
  now: number,
  config: Config,
  events: NewEvent[],
): void {
  for (const worker of state.workers.values()) {
    if (!isLive(worker)) continue;
    if (now - silentSince(state, worker) <= config.WORKER_TTL) continue;
    const reason = worker.status === 'leaving' ? 'left' : 'ttl';
    events.push(...evictionEvents(state, worker.workerId, reason, seqAfter(state, events)));
  }
}

/** Containers a call in flight was placed on or bound to, as `worker/container` keys. */
function heldByCalls(state: ClusterState): Set<string> {
  const held = new Set<string>();
  for (const reservation of state.reservations.values()) {
    if (reservation.containerId !== null) {
      held.add(`${reservation.workerId}/${reservation.containerId}`);
    }
  }
  return held;
}

/**
 * How long after becoming idle a container's record may stay without the worker reporting it
 * removed: the worker destroys it at `EXECUTOR_TTL` and reports at once; one report interval more
 * allows for that report's delivery.
 */
export function unreportedAfter(config: Config): number {
  return config.EXECUTOR_TTL + config.WORKER_UTILIZATION_INTERVAL;
}

/**
 * Idle and errored container records past their time, on workers that are not being evicted,
 * appended to `events` (the pass's events so far).
 */
function forgetStaleContainers(
  state: ClusterState,
  now: number,
  config: Config,
  evicted: ReadonlySet<string>,
  events: NewEvent[],
): void {
  const held = heldByCalls(state);
  for (const worker of state.workers.values()) {
    if (!isLive(worker) || evicted.has(worker.workerId)) continue;
    for (const container of worker.containers.values()) {
      if (held.has(`${worker.workerId}/${container.containerId}`)) continue;
      const age = now - epochOf(container.since);
      const reason =
        container.state === 'ready' && age > unreportedAfter(config)
          ? 'unreported'
          : container.state === 'error' && age > config.EXECUTOR_ERROR_TTL
            ? 'error'
            : null;
      if (reason === null) continue;
      const seq = seqAfter(state, events);
      events.push(
        ...forgetContainerEvents(state, worker.workerId, container.containerId, reason, seq),
      );
    }
  }
}

/** Reservations older than twice `EXECUTION_TIMEOUT`: force-released, appended to `events`. */
function expireStaleReservations(
  state: ClusterState,
  now: number,
  config: Config,
  expiredSessions: ReadonlySet<string>,
  events: NewEvent[],
): void {
  const limit = 2 * config.EXECUTION_TIMEOUT;
  for (const reservation of state.reservations.values()) {
    if (now - epochOf(reservation.since) <= limit) continue;
    for (const event of reservationExpiredEvents(state, reservation.requestId)) {
      // A session expired in this same pass has no pin left to drop.
      if (event.type === 'SessionUnpinned' && expiredSessions.has(event.sessionId)) continue;
      events.push(event);
    }
  }
}

/** The events one reaper pass appends at time `now` (epoch ms); empty when nothing is due. */
export function reap(state: ClusterState, now: number, config: Config = state.config): NewEvent[] {
  const events: NewEvent[] = [];
  evictSilentWorkers(state, now, config, events);
  const evicted = new Set<string>();
  for (const event of events) if (event.type === 'WorkerEvicted') evicted.add(event.workerId);
  forgetStaleContainers(state, now, config, evicted, events);
  const expiredSessions = new Set<string>();
  for (const event of events) {
    if (event.type === 'SessionExpired') expiredSessions.add(event.sessionId);
  }
  expireStaleReservations(state, now, config, expiredSessions, events);
  return events;
}

/** When the reaper runs. */
export interface ReapInput {
  /** Now, in epoch ms (the router's clock, the one that stamps the log). */
  readonly now: number;
  /** Default: the config in force. */
  readonly config?: Config;
}

/** A reaper pass: `reap`'s events, caused by the reaper (`reaper`). */
export function decideReap(state: ClusterState, input: ReapInput): Decision {
  return {
    cause: { kind: 'reaper' },
    events: reap(state, input.now, input.config ?? state.config),
  };
}
