/**
 * A synthetic but consistent cluster history for the replay benchmark: every decision in it was
 * made by the real placement against the state at that point, as the router would have logged
 * it, so `verify` reproduces all of them.
 */
import {
  causeText,
  EVENT_SCHEMA_VERSION,
  validateEvent,
  type ClusterEvent,
  type NewEvent,
} from '../src/events/index.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { decideCall } from '../src/core/calls/index.js';
import { decide } from '../src/core/decisions.js';
import { PLACEMENT_RULES_VERSION, PlacementCaches } from '../src/core/placement/index.js';
import { demand, GiB, registered } from '../test/support/events.js';
import { CATALOGUE, prng } from '../test/support/synthetic-log.js';

interface Running {
  requestId: string;
  sessionId: string | null;
  workerId: string;
  containerId: string | null;
  reused: boolean;
  checkpointId: string | null;
}

/**
 * Yields about `events` events over `workers` workers, deterministically from `seed`, decided by
 * the placement rules `rulesVersion` (default: this code's).
 */
export function* simulatedLog(options: {
  seed: number;
  events: number;
  workers: number;
  rulesVersion?: number;
}): Generator<ClusterEvent> {
  const random = prng(options.seed);
  let state: ClusterState = initialState();
  const caches = new PlacementCaches();
  let seq = 0;
  const start = Date.UTC(2026, 10, 30, 10);
  const stamp = (event: NewEvent, cause: string): ClusterEvent => {
    seq += 1;
    const at = new Date(start + seq * 10).toISOString();
    const stamped = validateEvent({ seq, at, cause, ...event });
    state = applyInPlace(state, stamped, caches);
    return stamped;
  };
  yield stamp(
    {
      type: 'RouterStarted',
      config: {},
      version: 'bench',
      rulesVersion: options.rulesVersion ?? PLACEMENT_RULES_VERSION,
      routerId: null,
      takeoverFrom: null,
      schemaVersion: EVENT_SCHEMA_VERSION,
    },
    'start',
  );
  yield stamp({ type: 'CatalogueLoaded', revision: 'bench', catalogue: CATALOGUE }, 'start');
  for (let i = 0; i < options.workers; i += 1) {
    yield stamp(registered(`w${i}`, { memoryTotal: 64 * GiB, maxContainers: 32 }), `report:w${i}`);
  }
  const running: Running[] = [];
  let requests = 0;
  let containers = 0;
  while (seq < options.events) {
    const roll = running.length > 2 * options.workers ? 0.9 : random();
    if (roll < 0.3) {
      const workerId = `w${Math.floor(random() * options.workers)}`;
      const worker = state.workers.get(workerId);
      yield stamp(
        {
          type: 'WorkerUtilization',
          workerId,
          memoryUsed: Math.floor(random() * 24) * GiB,
          containerCount: worker?.containers.size ?? 0,
          cpuUsed: Math.round(random() * 800) / 100,
          cpuTotal: 8,
          gpuMemoryUsed: null,
          containers: null,
          reportSeq: null,
          standbys: null,
        },
        `report:${workerId}`,
      );
    } else if (roll < 0.55) {
      requests += 1;
      const requestId = `req-${requests}`;
      const sessionId = random() < 0.2 ? `sess-${Math.floor(random() * 500)}` : null;
      const call = {
        requestId,
        sessionId,
        demand: demand({
          memory: random() < 0.5 ? null : (1 + Math.floor(random() * 4)) * GiB,
          imports: random() < 0.4 ? ['numpy'] : null,
        }),
      };
      const made = decideCall(state, { call, caches });
      const cause = causeText(made.cause);
      for (const event of made.events) yield stamp(event, cause);
      const decision = made.placement;
      if (decision.outcome === 'placed') {
        running.push({
          requestId,
          sessionId,
          workerId: decision.workerId,
          containerId: decision.containerId,
          reused: decision.containerId !== null,
          checkpointId: decision.checkpointId,
        });
      }
    } else if (running.length > 0) {
      const call = running.splice(Math.floor(random() * running.length), 1)[0] as Running;
      let containerId = call.containerId;
      if (containerId === null) {
        containers += 1;
        containerId = `${call.workerId}-c${containers}`;
        yield stamp(
          {
            type: 'ContainerStateChanged',
            workerId: call.workerId,
            containerId,
            state: 'busy',
            checkpointId: call.checkpointId,
            reportSeq: null,
          },
          `report:${call.workerId}`,
        );
        yield stamp(
          {
            type: 'CallBound',
            requestId: call.requestId,
            containerId,
            checkpointId: call.checkpointId,
          },
          `answer:${call.requestId}`,
        );
        if (call.sessionId !== null) {
          yield stamp(
            {
              type: 'SessionPinned',
              sessionId: call.sessionId,
              workerId: call.workerId,
              containerId,
              requestId: call.requestId,
              checkpointId: call.checkpointId,
            },
            `answer:${call.requestId}`,
          );
        }
      }
      const ok = random() < 0.95;
      // The call's end as the router decides it (a failed session call unpins its session).
      const ended = decide('end', state, {
        requestId: call.requestId,
        code: ok ? null : 'INTERNAL',
      });
      for (const event of ended.events) yield stamp(event, causeText(ended.cause));
      const keep = ok && call.sessionId !== null;
      if (!keep && !call.reused) {
        yield stamp(
          {
            type: 'ContainerStateChanged',
            workerId: call.workerId,
            containerId,
            state: 'removed',
            checkpointId: call.checkpointId,
            reportSeq: null,
          },
          `report:${call.workerId}`,
        );
      } else {
        yield stamp(
          {
            type: 'ContainerStateChanged',
            workerId: call.workerId,
            containerId,
            state: 'ready',
            checkpointId: call.checkpointId,
            reportSeq: null,
          },
          `report:${call.workerId}`,
        );
      }
    }
  }
}
