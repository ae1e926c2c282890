/**
 * A client ends its session (`TenantService.EndSession`): the rule, as a decision. A session the
 * log knows and that has not ended or expired gets `SessionEnded` (with the tenant whose
 * credential asked, and the container it held, if any); its later calls are refused like those
 * of an expired session. The decision also says which container the worker must destroy now: the
 * session's pin, when its worker is live and has an address. Ending an unknown, ended or expired
 * session records nothing. The shell takes the session's turn first, so no call of this router
 * runs in the container while it is ended.
 *
 * A session is its owner's (the tenant of its first placed call): another tenant's end of it is
 * decided exactly like the end of an unknown session (nothing recorded, `ended` false), and only
 * `foreign` tells the router's own log what it was.
 */
import type { Cause } from '../../events/cause.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { hasAddress, isLive } from '../../projections/queries.js';
import type { Decision } from '../decision.js';
import { InvalidStreamError } from '../errors.js';
import type { ForeignId } from '../placement/decision.js';
import { ownsSession } from '../placement/session-owner.js';
import { checkId } from '../calls/call-fields.js';

/** Who ends which session. */
export interface SessionEndInput {
  readonly sessionId: string;
  /** The tenant the caller's credential names; null without tenants. */
  readonly tenantId: string | null;
}

/** The container a session end gives back, and where its worker is. */
export interface EndedContainer {
  readonly workerId: string;
  readonly containerId: string;
  readonly address: string;
}

/** The decision, and what the shell does after recording it. */
export interface SessionEndDecision extends Decision {
  /** True when this decision ends the session (it records `SessionEnded`). */
  readonly ended: boolean;
  /** The worker and container the session held, to destroy now; null when there is none to ask. */
  readonly container: EndedContainer | null;
  /** The session's container as recorded (also when its worker cannot be asked). */
  readonly pin: { readonly workerId: string; readonly containerId: string } | null;
  /** Set when the session is another tenant's: for the router's log, never for the caller. */
  readonly foreign?: ForeignId;
}

/** The session ID of an end request, checked like a call's (`INVALID_ARGUMENT` otherwise). */
export function sessionToEnd(sessionId: string): string {
  if (sessionId === '') throw new InvalidStreamError('ending a session needs its session_id');
  checkId('session_id', sessionId);
  return sessionId;
}

/** Ends `input.sessionId`, or records nothing when it is unknown, ended or expired. */
export function decideSessionEnd(state: ClusterState, input: SessionEndInput): SessionEndDecision {
  const sessionId = sessionToEnd(input.sessionId);
  const cause: Cause = { kind: 'session', sessionId };
  const session = state.sessions.get(sessionId);
  if (session !== undefined && !ownsSession(session, input.tenantId)) {
    const foreign: ForeignId = { kind: 'session', id: sessionId, ownerTenantId: session.tenantId };
    return { cause, events: [], ended: false, container: null, pin: null, foreign };
  }
  if (session === undefined || session.expired !== null) {
    return { cause, events: [], ended: false, container: null, pin: null };
  }
  const pin = session.pin;
  const worker = pin === null ? undefined : state.workers.get(pin.workerId);
  const reachable =
    pin !== null && worker !== undefined && isLive(worker) && hasAddress(worker)
      ? { workerId: pin.workerId, containerId: pin.containerId, address: worker.address }
      : null;
  return {
    cause,
    events: [
      {
        type: 'SessionEnded',
        sessionId,
        tenantId: input.tenantId,
        workerId: pin?.workerId ?? null,
        containerId: pin?.containerId ?? null,
      },
    ],
    ended: true,
    container: reachable,
    pin: pin === null ? null : { workerId: pin.workerId, containerId: pin.containerId },
  };
}
