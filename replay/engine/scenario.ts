/**
 * Scenarios written in code, recorded as a router would have logged them: each call's
 * `CallRequested` is followed by placement's decision, decided against the state at that point,
 * through the same table of core decisions the router uses (`decide`; no rule is written again
 * here). This is how fixtures are made from code (see docs/replay.md); pure, with a fixed clock.
 */
import {
  containerRemovedEvents,
  evictionEvents,
  forgetContainerEvents,
  seqAfter,
} from '../../src/core/consequences/index.js';
import type { Decision } from '../../src/core/decision.js';
import { decide } from '../../src/core/decisions.js';
import type { PinChangeDecision } from '../../src/core/pins/index.js';
import { causeText, type Cause } from '../../src/events/cause.js';
import { validateEvent } from '../../src/events/decode.js';
import type { ClusterEvent, Demand, NewEvent } from '../../src/events/types.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import type { GrpcCodeName } from '../../src/shared/grpc-codes.js';
import type { PlacedDecision, PlacementDecision } from '../../src/core/placement/index.js';

/** A call reaching the router. */
export interface CallStep {
  readonly step: 'call';
  readonly requestId: string;
  readonly sessionId?: string | null;
  readonly demand?: Partial<Demand>;
  /** The tenant the caller's credential names (default none). */
  readonly tenantId?: string | null;
  /** The request this call retries (default none). */
  readonly retryOf?: string | null;
  /** What its caller's deadline leaves it, ms (`CallRequested.deadlineMs`; default none). */
  readonly deadlineMs?: number | null;
  /** The key of its image declaration (`CallRequested.imageKey`; default none). */
  readonly imageKey?: string | null;
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
  readonly code?: GrpcCodeName | null;
}

/**
 * The router could not open the stream of a placed call: the failed dial's decision (the probe
 * failure it counts as, and the call placed again or refused).
 */
export interface DialFailedStep {
  readonly step: 'dial-failed';
  readonly requestId: string;
  readonly error: string;
  /** What the call is meant to get next (as for `CallStep.expect`). */
  readonly expect?: string;
}

/**
 * An operator's pin change, decided by the core's own pin decisions; the router then tells the
 * workers what to keep (`ResidencyProtected`), recorded after it as the router's keeper does.
 */
export interface PinStep {
  readonly step: 'pin';
  readonly change: 'stage' | 'flip' | 'rollback' | 'set-k' | 'remove';
  readonly tenantId: string;
  readonly version?: string;
  readonly k?: number;
  readonly force?: boolean;
}

/** The router tells workers what to keep now (after a fleet change, or a reaper pass). */
export interface ProtectStep {
  readonly step: 'protect';
}

/** One step of a scenario: a plain event, or a call's part the recorder fills in. */
export type ScenarioStep =
  NewEvent | CallStep | BoundStep | FinishStep | DialFailedStep | PinStep | ProtectStep;

const EMPTY_DEMAND: Demand = {
  memory: null,
  gpuMemory: null,
  gpu: null,
  disableOptimizedExecution: null,
  checkpointId: null,
  imports: null,
  packages: null,
  pinned: null,
};

/** Throws when a call's decision is not the one its step expects. */
function checkExpected(step: CallStep | DialFailedStep, decision: PlacementDecision): void {
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

/**
 * The cause a router records for an event a scenario writes as a plain step: what would have
 * triggered it. Events a router only ever appends as a consequence (or never alone) record none.
 */
function causeOfPlain(event: NewEvent): Cause | null {
  switch (event.type) {
    case 'RouterStarted':
    case 'CatalogueLoaded':
      return { kind: 'start' };
    case 'WorkerRegistered':
    case 'WorkerUtilization':
    case 'WorkerLeaving':
    case 'ContainerStateChanged':
      return { kind: 'report', workerId: event.workerId };
    case 'WorkerProbeFailed':
    case 'WorkerProbeSucceeded':
      return { kind: 'probe', workerId: event.workerId };
    case 'WorkerEvicted':
      return event.reason === 'probe'
        ? { kind: 'probe', workerId: event.workerId }
        : { kind: 'reaper' };
    case 'ContainerForgotten':
    case 'ReservationExpired':
      return { kind: 'reaper' };
    case 'SessionEnded':
      return { kind: 'session', sessionId: event.sessionId };
    case 'ResidencyChanged':
    case 'ResidencyBudget':
    case 'ImageBuilt':
    case 'ImageBuildFailed':
    case 'ImageRemoved':
      return { kind: 'report', workerId: event.workerId };
    case 'PinStaged':
    case 'RoutingRevised':
    case 'QuotaChanged':
    case 'QuotaRemoved':
      return { kind: 'admin', tenantId: event.tenantId };
    case 'ResidencyProtected':
      return { kind: 'routing' };
    default:
      return null;
  }
}

/**
 * A plain step with the consequences the router appends with it, by the core's own functions
 * (an eviction expires its sessions; a removed or forgotten container its session's). Empty when
 * the router would append nothing for it.
 */
function withConsequences(state: ClusterState, event: NewEvent): readonly NewEvent[] {
  switch (event.type) {
    case 'WorkerRegistered': {
      // The registry's own decision: a restart ends the old instance, a full report reconciles.
      const { type: _type, ...report } = event;
      return decide('statusReport', state, { report, holderAnswers: false }).events;
    }
    case 'WorkerUtilization':
      if (event.containers === null) return [event];
      return decide('utilizationReport', state, { ...event, instanceId: null }).events;
    case 'WorkerEvicted':
      return evictionEvents(state, event.workerId, event.reason, seqAfter(state));
    case 'ContainerStateChanged':
      return event.state === 'removed'
        ? containerRemovedEvents(
            state,
            event.workerId,
            event.containerId,
            event.checkpointId,
            event.reportSeq,
            seqAfter(state),
          )
        : [event];
    case 'ContainerForgotten':
      return forgetContainerEvents(
        state,
        event.workerId,
        event.containerId,
        event.reason,
        seqAfter(state),
      );
    default:
      return [event];
  }
}

/**
 * Records a scenario: seqs from 1, one second apart from `startMs`. Calls are decided, bound and
 * ended by the core's decisions, exactly as the router appends them, causes included.
 */
export function recordScenario(
  steps: readonly ScenarioStep[],
  startMs = Date.UTC(2026, 10, 30, 10),
): ClusterEvent[] {
  const log: ClusterEvent[] = [];
  let state: ClusterState = initialState();
  const placements = new Map<string, { sessionId: string | null; placed: PlacedDecision }>();
  const calls = new Map<string, { requestId: string; sessionId: string | null; demand: Demand }>();
  const append = (events: readonly NewEvent[], cause: Cause | null) => {
    const text = cause === null ? null : causeText(cause);
    for (const event of events) {
      const seq = log.length + 1;
      const stamped = validateEvent({
        seq,
        at: new Date(startMs + seq * 1000).toISOString(),
        cause: text,
        ...event,
      });
      log.push(stamped);
      state = applyInPlace(state, stamped);
    }
  };
  const record = (decision: Decision) => append(decision.events, decision.cause);
  for (const step of steps) {
    if (!('step' in step)) {
      const events = withConsequences(state, step);
      if (events.length > 0) {
        append(events, causeOfPlain(step));
        continue;
      }
      // A step the router's functions would not append (about a worker or a container the router
      // no longer knows) is written as given: it has no consequence.
      append([step], causeOfPlain(step));
      continue;
    }
    switch (step.step) {
      case 'call': {
        const sessionId = step.sessionId ?? null;
        const demand = { ...EMPTY_DEMAND, ...step.demand };
        const call = {
          requestId: step.requestId,
          sessionId,
          demand,
          tenantId: step.tenantId ?? null,
          retryOf: step.retryOf ?? null,
          deadlineMs: step.deadlineMs ?? null,
          // Written only when named, so scenarios without images record as they did.
          ...(step.imageKey ? { imageKey: step.imageKey } : {}),
        };
        calls.set(step.requestId, call);
        const made = decide('call', state, { call });
        if (step.expect !== undefined) checkExpected(step, made.placement);
        record(made);
        if (made.placement.outcome === 'placed') {
          placements.set(step.requestId, { sessionId, placed: made.placement });
        }
        break;
      }
      case 'dial-failed': {
        const call = calls.get(step.requestId);
        const known = placements.get(step.requestId);
        if (!call || !known) {
          throw new Error(`scenario: ${step.requestId} was not placed, so no dial of it can fail`);
        }
        const made = decide('dialFailure', state, {
          call,
          workerId: known.placed.workerId,
          error: step.error,
        });
        if (step.expect !== undefined) checkExpected(step, made.placement);
        record(made);
        if (made.placement.outcome === 'placed') {
          placements.set(step.requestId, { sessionId: known.sessionId, placed: made.placement });
        } else placements.delete(step.requestId);
        break;
      }
      case 'bound': {
        const known = placements.get(step.requestId);
        if (!known)
          throw new Error(`scenario: ${step.requestId} was not placed, so it cannot be bound`);
        const checkpointId =
          step.checkpointId === undefined ? known.placed.checkpointId : step.checkpointId;
        record(
          decide('answer', state, {
            requestId: step.requestId,
            sessionId: known.sessionId,
            placed: known.placed,
            ids: {
              requestId: step.requestId,
              sessionId: known.sessionId ?? '',
              workerId: known.placed.workerId,
              containerId: step.containerId,
              checkpointId: checkpointId ?? '',
              version: known.placed.version ?? '',
              routingRevision: known.placed.routingRevision ?? 0,
            },
          }),
        );
        break;
      }
      case 'finish': {
        const code = step.ok ? null : (step.code ?? 'UNKNOWN');
        record(decide('end', state, { requestId: step.requestId, code }));
        break;
      }
      case 'pin':
        record(pinChange(state, step, startMs + (log.length + 1) * 1000));
        record(decide('protection', state, { now: startMs + (log.length + 1) * 1000 }));
        break;
      case 'protect':
        record(decide('protection', state, { now: startMs + (log.length + 1) * 1000 }));
        break;
    }
  }
  return log;
}

/** A pin step's decision, by the core's pin decisions (a refusal throws, naming the step). */
function pinChange(state: ClusterState, step: PinStep, now: number): PinChangeDecision {
  const { tenantId } = step;
  const force = step.force ?? false;
  switch (step.change) {
    case 'stage':
      return decide('stage', state, {
        tenantId,
        version: step.version ?? '',
        k: step.k ?? null,
        force,
        now,
      });
    case 'flip':
      return decide('flip', state, { tenantId, expectRevision: null, force, now });
    case 'rollback':
      return decide('rollback', state, { tenantId, expectRevision: null, now });
    case 'set-k':
      return decide('setK', state, { tenantId, k: step.k ?? 1, expectRevision: null, force, now });
    case 'remove':
      return decide('remove', state, { tenantId, expectRevision: null, now });
  }
}
