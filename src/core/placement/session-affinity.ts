/**
 * Rule 1: a call of a session whose container is pinned goes to that container, with no filtering
 * or scoring, while the container's worker is ready and the container is ready or busy. A pinned
 * container the worker has not reported yet counts as busy: removals are always reported, and
 * they expire the session. Whether the container was restored from a checkpoint is what the worker
 * reported for it, on its first answer (`CallBound`, carried by the pin) or on its container
 * report (`ContainerStateChanged`), whichever the log has.
 *
 * A session is its owner's (the tenant of its first placed call): a call of another tenant (or
 * without one) naming it is refused `NOT_FOUND` with the words `foreignSessionMessage` gives for
 * every session it does not own, whatever that session's state, so an ID's existence, liveness or
 * expiry does not leak; the refusal is marked `foreign` for the router's own log.
 */
import type { Demand } from '../../events/types.js';
import type { ClusterState, SessionPin, WorkerRecord } from '../../projections/cluster-state.js';
import { isPlaceable } from '../../projections/queries.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { ForeignId, PlacementDecision } from './decision.js';
import { refuse } from './outcome.js';
import { rulesSteps } from './rules-version.js';
import type { Placing } from './placing.js';
import { foreignSessionMessage, ownsSession, sessionExpiredMessage } from './session-owner.js';

/** What the session means for this call. */
export type Affinity =
  | { readonly kind: 'new'; readonly verdict: string }
  | {
      readonly kind: 'reuse';
      readonly pin: SessionPin;
      readonly worker: WorkerRecord;
      readonly verdict: string;
    }
  | { readonly kind: 'drop-pin'; readonly pin: SessionPin; readonly verdict: string }
  | {
      readonly kind: 'reject';
      readonly code: GrpcCodeName;
      readonly message: string;
      /** Set when the session is another tenant's: said in the router's log, never to the caller. */
      readonly foreign?: ForeignId;
    };

function describeCheckpoint(checkpointId: string | null): string {
  return checkpointId === null ? 'a cold start' : `checkpoint "${checkpointId}"`;
}

/**
 * The checkpoint a session's container was restored from, as its worker reported it: on the call's
 * first answer (the pin's) or, in a log that records it only there, on the container's report.
 */
export function sessionCheckpoint(state: ClusterState, pin: SessionPin): string | null {
  if (pin.checkpointId !== null) return pin.checkpointId;
  return state.workers.get(pin.workerId)?.containers.get(pin.containerId)?.checkpointId ?? null;
}

/** Why a pinned container cannot take the call, or null when it can. */
function pinUnusable(state: ClusterState, pin: SessionPin): string | null {
  const worker = state.workers.get(pin.workerId);
  if (!worker || !isPlaceable(worker)) {
    return `its worker ${pin.workerId} is ${worker ? worker.status : 'unknown'}`;
  }
  const container = worker.containers.get(pin.containerId);
  if (container && container.state !== 'ready' && container.state !== 'busy') {
    return `its container ${pin.containerId} is in state ${container.state}`;
  }
  return null;
}

/**
 * Rule 1 for a call of session `sessionId` by `tenantId`; `unreachable` are the workers earlier
 * attempts of the call could not reach (a failed dial).
 */
export function sessionAffinity(
  state: ClusterState,
  sessionId: string,
  demand: Demand,
  unreachable: readonly string[] = [],
  tenantId: string | null = null,
): Affinity {
  const session = state.sessions.get(sessionId);
  if (!session) return { kind: 'new', verdict: 'new session: placed like a new call' };
  // Rules before 4 (a log recorded then): another tenant's session was used as the caller's own.
  if (rulesSteps(state.rulesVersion).owners && !ownsSession(session, tenantId)) {
    return {
      kind: 'reject',
      code: 'NOT_FOUND',
      message: foreignSessionMessage(sessionId),
      foreign: { kind: 'session', id: sessionId, ownerTenantId: session.tenantId },
    };
  }
  if (session.expired) {
    return {
      kind: 'reject',
      code: 'NOT_FOUND',
      message: sessionExpiredMessage(sessionId, session.expired.seq, session.expired.reason),
    };
  }
  const stored = session.pin;
  if (!stored)
    return { kind: 'new', verdict: 'session without a pinned container: placed like a new call' };
  const pin: SessionPin = { ...stored, checkpointId: sessionCheckpoint(state, stored) };
  const unusable = pinUnusable(state, pin);
  if (unusable !== null) {
    return {
      kind: 'drop-pin',
      pin,
      verdict: `pin to ${pin.workerId}/${pin.containerId} dropped: ${unusable}; placed like a new call`,
    };
  }
  if (unreachable.includes(pin.workerId)) {
    return {
      kind: 'reject',
      code: 'UNAVAILABLE',
      message: `session ${sessionId} lives in container ${pin.containerId} on worker ${pin.workerId}, which the router could not reach; retry the call (the session expires if the worker is evicted)`,
    };
  }
  if (demand.disableOptimizedExecution === true && pin.checkpointId !== null) {
    return {
      kind: 'reject',
      code: 'FAILED_PRECONDITION',
      message: `session ${sessionId} runs in a container restored from checkpoint "${pin.checkpointId}"; disable_optimized_execution cannot be honoured in it (start a new session)`,
    };
  }
  const wanted = demand.checkpointId ?? '';
  if (wanted !== '' && wanted !== pin.checkpointId) {
    return {
      kind: 'reject',
      code: 'FAILED_PRECONDITION',
      message: `session ${sessionId} runs in a container from ${describeCheckpoint(pin.checkpointId)}, not the requested checkpoint "${wanted}"`,
    };
  }
  const worker = state.workers.get(pin.workerId) as WorkerRecord;
  return {
    kind: 'reuse',
    pin,
    worker,
    verdict: `reuses the session's container ${pin.workerId}/${pin.containerId} (${describeCheckpoint(pin.checkpointId)}), no filtering or ranking`,
  };
}

/** What rule 1 leaves for the rest of the pipeline. */
export type SessionStep =
  /** Placed like a new call (no session, a new one, or its pin dropped). */
  | { readonly kind: 'place' }
  /** The session's container takes the call. */
  | { readonly kind: 'reuse'; readonly pin: SessionPin; readonly worker: WorkerRecord }
  /** The call is refused. */
  | { readonly kind: 'refused'; readonly decision: PlacementDecision };

const PLACE: SessionStep = { kind: 'place' };

/**
 * Rule 1 for the call being placed: its session's verdict is explained; a refusal ends the
 * placement, a dropped pin's `SessionUnpinned` goes before the outcome.
 */
export function sessionStep(placing: Placing): SessionStep {
  const { sessionId } = placing;
  if (sessionId === null) return PLACE;
  const { state, call, unreachable, tenantId } = placing;
  const affinity = sessionAffinity(state, sessionId, call.demand, unreachable, tenantId);
  placing.explain?.session(
    sessionId,
    affinity.kind === 'reject' ? affinity.message : affinity.verdict,
  );
  switch (affinity.kind) {
    case 'reject':
      return {
        kind: 'refused',
        decision: refuse(placing, affinity.code, affinity.message, affinity.foreign),
      };
    case 'reuse':
      return { kind: 'reuse', pin: affinity.pin, worker: affinity.worker };
    case 'drop-pin':
      placing.before.push({ type: 'SessionUnpinned', sessionId, reason: 'container_unavailable' });
      return PLACE;
    case 'new':
      return PLACE;
  }
}
