/**
 * The pure steps of a call (no I/O, no clock): its decisions (placement when it has its turn, its
 * first answer, its end), the IDs its answers carry, and what a worker's failure or the client's
 * departure means for its outcome.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import {
  NO_TRAILERS,
  NOT_STARTED,
  RELAYED_TRAILERS,
  type CallTrailers,
} from '../../shared/call-trailers.js';
import { grpcCodeName, type GrpcCodeName } from '../../shared/grpc-codes.js';
import { inputsRaisedOfTrailers, raisedOfTrailers, type Raised } from '../../shared/raised.js';
import type { Config } from '../../shared/config.js';
import { queueFull, queuedCount, queueing, slotCapReached } from '../admission/index.js';
import { callFinishedEvents } from '../consequences/index.js';
import type { Decision } from '../decision.js';
import {
  place,
  rejected,
  type CallToPlace,
  type PlaceOptions,
  type PlacedDecision,
  type PlacementDecision,
} from '../placement/index.js';

/**
 * A call's decision: `CallRequested` (the demand as sent, and the tenant the caller's credential
 * names, null without one), then placement's outcome.
 */
export interface CallDecision extends Decision {
  /** Placement's decision, whose events follow `CallRequested` (unless the call queued). */
  readonly placement: PlacementDecision;
  /**
   * Why the call waits in the admission queue (`CallQueued` ends the events instead of
   * placement's outcome), or null when placement's outcome stands.
   */
  readonly queued: string | null;
}

/** What a call's decision is given: the call, and placement's options (config, caches). */
export interface CallDecisionInput extends PlaceOptions {
  readonly call: CallToPlace;
  /**
   * A batch's input count, recorded on `CallRequested` (null or absent: a plain call). Placement
   * never reads it: a batch is placed as the one call it is.
   */
  readonly inputs?: number | null;
  /** The function the client named, recorded for the call history (null or absent: none). */
  readonly function?: string | null;
  /** How long the call waited for its session's turn, ms (null or absent: it did not wait). */
  readonly turnWaitMs?: number | null;
}

/**
 * Step 3, when the call has its turn: `CallRequested` with the demand exactly as the client sent
 * it, then placement's events, as one append caused by the call (`call:REQUEST`).
 */
export function decideCall(state: ClusterState, input: CallDecisionInput): CallDecision {
  const { call } = input;
  const placement = place(state, call, input);
  const requested: NewEvent = {
    type: 'CallRequested',
    requestId: call.requestId,
    sessionId: call.sessionId,
    tenantId: call.tenantId ?? null,
    demand: call.demand,
    retryOf: call.retryOf ?? null,
    inputs: input.inputs ?? null,
    function: input.function ?? null,
    turnWaitMs: input.turnWaitMs ?? null,
    deadlineMs: call.deadlineMs ?? null,
    imageKey: call.imageKey ?? null,
  };
  const cause = { kind: 'call', requestId: call.requestId } as const;
  const config = input.config ?? state.config;
  const why = waitsInQueue(state, call, placement, config);
  // Placement's events before its outcome (a dropped pin's `SessionUnpinned`) stand.
  const before = placement.events.slice(0, -1);
  if (why === null) {
    const capped = placement.outcome === 'placed' ? capOf(state, call, placement) : null;
    if (capped === null)
      return { cause, events: [requested, ...placement.events], placement, queued: null };
    // No queue in force: a call beyond its tenant's cap is refused like one that finds no room.
    const refusal = rejected(call, before, 'RESOURCE_EXHAUSTED', capped, {
      version: null,
      routingRevision: null,
      retryAfterMs: null,
    });
    return { cause, events: [requested, ...refusal.events], placement: refusal, queued: null };
  }
  const full = queueFull(state, call.tenantId ?? null, config);
  if (full !== null) {
    const refusal = rejected(call, before, 'RESOURCE_EXHAUSTED', full, {
      version: null,
      routingRevision: null,
      retryAfterMs: config.ROUTING_RETRY_AFTER,
    });
    return { cause, events: [requested, ...refusal.events], placement: refusal, queued: null };
  }
  const queued: NewEvent = {
    type: 'CallQueued',
    requestId: call.requestId,
    sessionId: call.sessionId,
    tenantId: call.tenantId ?? null,
    demand: call.demand,
    retryOf: call.retryOf ?? null,
    why,
  };
  return { cause, events: [requested, ...before, queued], placement, queued: why };
}

/**
 * Why a call placement placed may not take its slot: it needs a new one (it does not reuse its
 * session's container) and its tenant holds its quota's `maxSlots`. Null when it may.
 */
function capOf(state: ClusterState, call: CallToPlace, placement: PlacedDecision): string | null {
  if (placement.containerId !== null) return null;
  return slotCapReached(state, call.tenantId ?? null);
}

/**
 * Why `call` waits in the admission queue, or null when placement's outcome stands: with the
 * queue in force, a call that does not fit now, and one placement would start in a new container
 * while calls of its tenant wait (first come, first served within a tenant). A call reusing its
 * session's container never waits.
 */
function waitsInQueue(
  state: ClusterState,
  call: CallToPlace,
  placement: PlacementDecision,
  config: Config,
): string | null {
  if (!queueing(state, config)) return null;
  if (placement.outcome === 'rejected')
    return placement.fit === 'not-now' ? (placement.waitsWith ?? placement.message) : null;
  const capped = capOf(state, call, placement);
  if (capped !== null) return capped;
  if (placement.containerId !== null || state.queue.size === 0) return null;
  const ahead = queuedCount(state, call.tenantId ?? null);
  return ahead === 0
    ? null
    : `${ahead} earlier call${ahead === 1 ? '' : 's'} of its tenant wait first`;
}

/**
 * The events of the first answer naming a container: `CallBound` with the checkpoint actually
 * used and, for a session's new container, `SessionPinned` with that checkpoint.
 */
export function boundEvents(
  requestId: string,
  sessionId: string | null,
  decision: PlacedDecision,
  ids: CallIds,
): NewEvent[] {
  const checkpointId = ids.checkpointId === '' ? null : ids.checkpointId;
  const events: NewEvent[] = [
    { type: 'CallBound', requestId, containerId: ids.containerId, checkpointId },
  ];
  if (sessionId !== null && decision.containerId === null) {
    events.push({
      type: 'SessionPinned',
      sessionId,
      workerId: decision.workerId,
      containerId: ids.containerId,
      requestId,
      checkpointId,
    });
  }
  return events;
}

/** What the first answer naming a container tells the call. */
export interface BoundInput {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly placed: PlacedDecision;
  /** The IDs of the worker's answer. */
  readonly ids: CallIds;
}

/** The first answer named the container: `boundEvents`, caused by it (`answer:REQUEST`). */
export function decideBound(_state: ClusterState, input: BoundInput): Decision {
  const { requestId, sessionId, placed, ids } = input;
  return {
    cause: { kind: 'answer', requestId },
    events: boundEvents(requestId, sessionId, placed, ids),
  };
}

/** How a placed call ended: its code, null for OK. */
export interface CallEndInput {
  readonly requestId: string;
  readonly code: GrpcCodeName | null;
  /** What its client was told of a failure (null or absent: nothing, or it succeeded). */
  readonly message?: string | null;
  /** What the function raised, as its worker reported (null or absent: it returned, or failed). */
  readonly raised?: Raised | null;
  /** An OK batch: how many of its inputs raised, as its worker reported (null or absent: none said). */
  readonly inputsRaised?: number | null;
}

/** The call ended, however: `CallFinished` and its consequences (`end:REQUEST`). */
export function decideCallEnd(state: ClusterState, input: CallEndInput): Decision {
  return {
    cause: { kind: 'end', requestId: input.requestId },
    events: callFinishedEvents(
      state,
      input.requestId,
      input.code,
      input.message ?? null,
      input.raised ?? null,
      input.inputsRaised ?? null,
    ),
  };
}

/**
 * The IDs an answer carries to the client: the router's request, session and worker IDs, the
 * container and checkpoint the worker reports (the placed ones when it names no container), and a
 * pinned call's version and routing revision as the router resolved them (a worker serves a
 * pinned call from exactly its version, or fails it).
 */
export function answerIds(placed: CallIds, fromWorker: CallIds | undefined): CallIds {
  const named = fromWorker !== undefined && fromWorker.containerId !== '';
  return {
    requestId: placed.requestId,
    sessionId: placed.sessionId,
    workerId: placed.workerId,
    containerId: named ? fromWorker.containerId : placed.containerId,
    checkpointId: named ? fromWorker.checkpointId : placed.checkpointId,
    version: placed.version,
    routingRevision: placed.routingRevision,
  };
}

/** How a call ends: its code (null for OK), the words for the client, and its trailers. */
export interface CallEnding {
  readonly code: GrpcCodeName | null;
  readonly details: string;
  /** What the client is told about the function besides the code (none: nothing to say). */
  readonly trailers?: CallTrailers;
  /** An OK ending whose function raised, as its worker reported (none: it returned). */
  readonly raised?: Raised | null;
  /** An OK batch's inputs that raised, as its worker reported (none: it said nothing). */
  readonly inputsRaised?: number | null;
}

/** The worker's trailers the client hears: those readie relays (src/shared/call-trailers.ts). */
export function relayedTrailers(trailers: CallTrailers): CallTrailers {
  const relayed: Record<string, string> = {};
  for (const name of RELAYED_TRAILERS) {
    const value = trailers[name];
    if (value !== undefined) relayed[name] = value;
  }
  return relayed;
}

/** Worker codes about the router's credentials, not the client's: never passed through. */
const ROUTER_CREDENTIAL_CODES: ReadonlySet<GrpcCodeName> = new Set([
  'UNAUTHENTICATED',
  'PERMISSION_DENIED',
]);

/**
 * What a worker's final status means for the client: its own code and message, named after the
 * worker, except a refusal of the router's credentials, which the client cannot fix (`INTERNAL`).
 */
export function workerEnding(
  workerId: string,
  code: number,
  details: string,
  trailers: CallTrailers = NO_TRAILERS,
): CallEnding {
  const name = grpcCodeName(code);
  if (name === 'OK') {
    return {
      code: null,
      details: 'OK',
      raised: raisedOfTrailers(trailers),
      inputsRaised: inputsRaisedOfTrailers(trailers),
    };
  }
  if (ROUTER_CREDENTIAL_CODES.has(name)) {
    return {
      code: 'INTERNAL',
      details:
        `worker ${workerId} refused the router's credentials (${name}: ${details}); ` +
        "the operator must check the router's --router-token-file against the worker's " +
        '--router-token-file (and their TLS settings)',
      // The worker refused before anything ran.
      trailers: NOT_STARTED,
    };
  }
  return {
    code: name,
    details: `worker ${workerId}: ${details}`,
    trailers: relayedTrailers(trailers),
  };
}

/**
 * How long a client's deadline (epoch ms, Infinity: none) leaves a call at `now`, whole ms, never
 * below 0; null without a deadline (`CallRequested.deadlineMs`).
 */
export function deadlineLeft(clientDeadline: number, now: number): number | null {
  if (!Number.isFinite(clientDeadline)) return null;
  return Math.max(0, Math.floor(clientDeadline - now));
}

/** How close to its deadline a client's reset counts as the deadline passing, in ms. */
export const DEADLINE_SLACK_MS = 250;

/**
 * What a client's departure means: `DEADLINE_EXCEEDED` when it came at (or just before) the
 * call's deadline, else `CANCELLED`. A client whose own deadline fires resets the stream exactly
 * like one that cancels, and its timer started a little before the router's (which counts from
 * the arrival of its headers), so a reset that close to the deadline is the deadline.
 */
export function departureOf(now: number, deadline: number): CallEnding {
  return now + DEADLINE_SLACK_MS >= deadline
    ? { code: 'DEADLINE_EXCEEDED', details: "the client's deadline passed" }
    : { code: 'CANCELLED', details: 'the client cancelled the call' };
}
