/**
 * Scenarios written in code, recorded as a router would have logged them: each call's
 * `CallRequested` is followed by placement's decision, decided against the state at that point.
 * This is how fixtures are made from code (see docs/replay.md); pure, with a fixed clock.
 */
import { validateEvent } from '../../src/events/decode.js';
import type { ClusterEvent, Demand, NewEvent } from '../../src/events/types.js';
import { clusterProjection, initialState, type ClusterState } from '../../src/projections/index.js';
import {
  place,
  type PlacedDecision,
  type PlacementDecision,
} from '../../src/core/placement/index.js';

/** A call reaching the router. */
export interface CallStep {
  readonly step: 'call';
  readonly requestId: string;
  readonly sessionId?: string | null;
  readonly demand?: Partial<Demand>;
  /**
   * What the call is meant to get: the worker it is placed on, or the code it is rejected with
   * (`'w2'`, `'RESOURCE_EXHAUSTED'`). Recording throws when placement decides otherwise, so a
   * broken placement cannot re-record a fixture unnoticed.
   */
  readonly expect?: string;
}

/** The worker's first answer named the container (and the checkpoint it really used). */
export interface BoundStep {
  readonly step: 'bound';
  readonly requestId: string;
  readonly containerId: string;
  /** The checkpoint used; default: the one placement chose (null for a cold start). */
  readonly checkpointId?: string | null;
}

/** The call ended. */
export interface FinishStep {
  readonly step: 'finish';
  readonly requestId: string;
  readonly ok: boolean;
  readonly code?: string | null;
}

/** One step of a scenario: a plain event, or a call's part the recorder fills in. */
export type ScenarioStep = NewEvent | CallStep | BoundStep | FinishStep;

const EMPTY_DEMAND: Demand = {
  memory: null,
  gpuMemory: null,
  gpu: null,
  disableOptimizedExecution: null,
  checkpointId: null,
  imports: null,
  packages: null,
};

/** Throws when a call's decision is not the one its step expects. */
function checkExpected(step: CallStep, decision: PlacementDecision): void {
  const got = decision.outcome === 'placed' ? decision.workerId : decision.code;
  if (got === step.expect) return;
  const decided =
    decision.outcome === 'placed'
      ? `placed it on ${decision.workerId}`
      : `rejected it with ${decision.code}: ${decision.message}`;
  throw new Error(
    `scenario: ${step.requestId} was expected to get ${step.expect}, but placement ${decided}`,
  );
}

/** Records a scenario: seqs from 1, one second apart from `startMs`. */
export function recordScenario(
  steps: readonly ScenarioStep[],
  startMs = Date.UTC(2026, 10, 30, 10),
): ClusterEvent[] {
  const log: ClusterEvent[] = [];
  let state: ClusterState = initialState();
  const placements = new Map<string, PlacedDecision>();
  const append = (event: NewEvent) => {
    const seq = log.length + 1;
    const stamped = validateEvent({
      seq,
      at: new Date(startMs + seq * 1000).toISOString(),
      ...event,
    });
    log.push(stamped);
    state = clusterProjection.apply(state, stamped);
  };
  for (const step of steps) {
    if (!('step' in step)) {
      append(step);
      // The router appends the sessions an eviction or a removal expires, right after it.
      const cause = log.at(-1) as ClusterEvent;
      for (const session of state.sessions.values()) {
        if (session.expired?.seq === cause.seq && cause.type !== 'SessionExpired') {
          append({
            type: 'SessionExpired',
            sessionId: session.sessionId,
            reason: session.expired.reason,
          });
        }
      }
      continue;
    }
    switch (step.step) {
      case 'call': {
        const sessionId = step.sessionId ?? null;
        const demand = { ...EMPTY_DEMAND, ...step.demand };
        append({ type: 'CallRequested', requestId: step.requestId, sessionId, demand });
        const decision = place(state, { requestId: step.requestId, sessionId, demand });
        if (step.expect !== undefined) checkExpected(step, decision);
        for (const event of decision.events) append(event);
        if (decision.outcome === 'placed') placements.set(step.requestId, decision);
        break;
      }
      case 'bound': {
        const placed = placements.get(step.requestId);
        if (!placed)
          throw new Error(`scenario: ${step.requestId} was not placed, so it cannot be bound`);
        const checkpointId =
          step.checkpointId === undefined ? placed.checkpointId : step.checkpointId;
        append({
          type: 'CallBound',
          requestId: step.requestId,
          containerId: step.containerId,
          checkpointId,
        });
        const sessionId = (
          placed.events.find((e) => e.type === 'CallPlaced') as { sessionId: string | null }
        ).sessionId;
        if (sessionId !== null && placed.containerId === null) {
          append({
            type: 'SessionPinned',
            sessionId,
            workerId: placed.workerId,
            containerId: step.containerId,
            requestId: step.requestId,
            checkpointId,
          });
        }
        break;
      }
      case 'finish': {
        const reservation = state.reservations.get(step.requestId);
        const session = reservation?.sessionId
          ? state.sessions.get(reservation.sessionId)
          : undefined;
        const createdPin = session?.pinnedBy === step.requestId;
        append({
          type: 'CallFinished',
          requestId: step.requestId,
          ok: step.ok,
          code: (step.code ?? null) as never,
        });
        if (!step.ok && session && createdPin) {
          append({ type: 'SessionUnpinned', sessionId: session.sessionId, reason: 'call_failed' });
        }
        break;
      }
    }
  }
  return log;
}
