/**
 * The pure steps of a call (no I/O, no clock): the events of its decision and of its first
 * answer, the IDs its answers carry, and what a worker's failure or the client's departure
 * means for its outcome.
 */
import type { Demand, NewEvent } from '../../events/types.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import { grpcCodeName, type GrpcCodeName } from '../../shared/grpc-codes.js';
import type { PlacedDecision, PlacementDecision } from '../placement/index.js';

/** The events of step 3: `CallRequested` (the demand as sent), then placement's outcome. */
export function decisionEvents(
  requestId: string,
  sessionId: string | null,
  demand: Demand,
  decision: PlacementDecision,
): NewEvent[] {
  return [{ type: 'CallRequested', requestId, sessionId, demand }, ...decision.events];
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

/**
 * The IDs an answer carries to the client: the router's request, session and worker IDs, and the
 * container and checkpoint the worker reports (the placed ones when it names no container).
 */
export function answerIds(placed: CallIds, fromWorker: CallIds | undefined): CallIds {
  const named = fromWorker !== undefined && fromWorker.containerId !== '';
  return {
    requestId: placed.requestId,
    sessionId: placed.sessionId,
    workerId: placed.workerId,
    containerId: named ? fromWorker.containerId : placed.containerId,
    checkpointId: named ? fromWorker.checkpointId : placed.checkpointId,
  };
}

/** How a call ends: its code (null for OK) and the words for the client. */
export interface CallEnding {
  readonly code: GrpcCodeName | null;
  readonly details: string;
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
export function workerEnding(workerId: string, code: number, details: string): CallEnding {
  const name = grpcCodeName(code);
  if (name === 'OK') return { code: null, details: 'OK' };
  if (ROUTER_CREDENTIAL_CODES.has(name)) {
    return {
      code: 'INTERNAL',
      details:
        `worker ${workerId} refused the router's credentials (${name}: ${details}); ` +
        'check READIE_AUTH_TOKEN and TLS settings on the router and the worker',
    };
  }
  return { code: name, details: `worker ${workerId}: ${details}` };
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
