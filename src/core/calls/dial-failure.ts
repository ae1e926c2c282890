/**
 * A failed dial (pure): the router could not open the stream to the worker a call was placed on
 * (connection refused, no route, a TLS failure) before anything of the call was sent. The attempt
 * is recorded (`CallDialFailed`, which releases its reservation), counted as a failed probe of
 * that worker (with the eviction it may bring), and the call is placed again without every worker
 * it could not reach, at most `MAX_DIAL_RETRIES` more times: one append caused by the dial
 * (`dial:REQUEST`), so replay decides it again exactly as the router did (docs/router.md).
 */
import type { NewEvent } from '../../events/types.js';
import { seqAfter } from '../consequences/index.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { Decision } from '../decision.js';
import { probeFailureEvents } from '../liveness/probe-outcome.js';
import {
  place,
  sessionIdOf,
  type CallToPlace,
  type PlacementCaches,
  type PlaceOptions,
  type PlacementDecision,
} from '../placement/index.js';
import { rejected } from '../placement/outcome.js';
import { ownResolution } from '../placement/pinned/resolution.js';
import { sessionExpiredMessage } from '../placement/session-owner.js';

/** How many more times a call whose stream could not be opened is placed again. */
export const MAX_DIAL_RETRIES = 2;

/** A call's stream could not be opened on the worker it was placed on. */
export interface DialFailureInput {
  readonly call: CallToPlace;
  /** The worker that could not be reached (the call's reservation names it). */
  readonly workerId: string;
  /** What the dial said, for the log and the probe count. */
  readonly error: string;
  /** Default: the config in force. */
  readonly config?: Config;
  /** Placement's caches for `state`, if the caller keeps them. */
  readonly caches?: PlacementCaches;
}

/** The decision, and the placement it ends with. */
export interface DialFailureDecision extends Decision {
  /** The call placed again, or refused. */
  readonly placement: PlacementDecision;
  /** How many attempts the call has had, this one included. */
  readonly attempts: number;
  /**
   * The options the call was placed again with (what an explanation of that placement needs);
   * null when it was refused without being placed (its session expired, or no attempt is left).
   */
  readonly placedWith: PlaceOptions | null;
}

/** A refusal of the call, naming a pinned call's resolution (it keeps it to the end). */
function refusal(
  state: ClusterState,
  call: CallToPlace,
  code: GrpcCodeName,
  message: string,
): PlacementDecision {
  const own = ownResolution(state.routing, call.requestId, call.tenantId ?? null);
  const routing =
    own === null
      ? undefined
      : { version: own.version, routingRevision: own.revision, retryAfterMs: null };
  return rejected(call, [], code, message, routing);
}

/**
 * The failed dial of `input.call` on `input.workerId`: `CallDialFailed`, the probe failure (and
 * eviction) it counts as, then the call's next placement on the state it leaves: never on a worker
 * an attempt of this call could not reach, and refused `UNAVAILABLE` once the call has had
 * `MAX_DIAL_RETRIES` + 1 attempts. Nothing but the failed attempt's worker changes for placement
 * (its release and count are on that worker, which is left out anyway), so the next placement is
 * decided against `state` with the failed workers left out; a session that the eviction expires is
 * refused as expired.
 */
export function decideDialFailure(
  state: ClusterState,
  input: DialFailureInput,
): DialFailureDecision {
  const { call, workerId, error } = input;
  const config = input.config ?? state.config;
  const reservation = state.reservations.get(call.requestId);
  const unreachable = [...(reservation?.unreachable ?? []), workerId];
  const head: NewEvent[] = [{ type: 'CallDialFailed', requestId: call.requestId, workerId, error }];
  const why = `the stream of a call could not be opened: ${error}`;
  head.push(...probeFailureEvents(state, workerId, why, config, seqAfter(state, head)));
  const attempts = unreachable.length;
  const sessionId = sessionIdOf(call.sessionId);
  // The eviction this failure brings expires the session: refused in the words its calls get.
  const expired = head.find(
    (event): event is Extract<NewEvent, { type: 'SessionExpired' }> =>
      event.type === 'SessionExpired' && event.sessionId === sessionId,
  );
  let placement: PlacementDecision;
  let placedWith: PlaceOptions | null = null;
  if (sessionId !== null && expired !== undefined) {
    placement = refusal(
      state,
      call,
      'NOT_FOUND',
      sessionExpiredMessage(sessionId, expired.causeSeq ?? seqAfter(state), expired.reason),
    );
  } else if (attempts > MAX_DIAL_RETRIES) {
    placement = refusal(
      state,
      call,
      'UNAVAILABLE',
      `the router could not open a stream to ${unreachable.join(', ')} (${attempts} attempts); last: ${error}`,
    );
  } else {
    placedWith = { config, unreachable, dialError: error };
    placement = place(
      state,
      call,
      input.caches ? { ...placedWith, caches: input.caches } : placedWith,
    );
  }
  return {
    cause: { kind: 'dial', requestId: call.requestId },
    events: [...head, ...placement.events],
    placement,
    attempts,
    placedWith,
  };
}
