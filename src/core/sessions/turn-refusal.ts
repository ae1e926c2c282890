/**
 * A session call that waited `SESSION_WAIT_TIMEOUT` for its turn is refused "session is busy"
 * (`RESOURCE_EXHAUSTED`), and the refusal is logged (`SessionTurnRefused`), so the log tells
 * every call's end, even one that never reached placement, and replay can check the refusal was
 * the setting's: a wait shorter than `SESSION_WAIT_TIMEOUT` in force refuses nothing.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { Decision } from '../decision.js';

/** A call that gave up waiting for its session's turn. */
export interface TurnRefusalInput {
  readonly requestId: string;
  readonly sessionId: string;
  readonly tenantId: string | null;
  /** How long it waited, ms (the router's clock). */
  readonly waitedMs: number;
  /** Calls of the session still ahead of it. */
  readonly ahead: number;
  /** Default: the config in force. */
  readonly config?: Config;
}

/** The refusal of a call whose wait for its session's turn ran out (`call:REQUEST`). */
export function decideTurnRefusal(state: ClusterState, input: TurnRefusalInput): Decision {
  const config = input.config ?? state.config;
  const events: NewEvent[] =
    input.waitedMs >= config.SESSION_WAIT_TIMEOUT
      ? [
          {
            type: 'SessionTurnRefused',
            requestId: input.requestId,
            sessionId: input.sessionId,
            tenantId: input.tenantId,
            waitedMs: Math.round(input.waitedMs),
            ahead: input.ahead,
          },
        ]
      : [];
  return { cause: { kind: 'call', requestId: input.requestId }, events };
}
