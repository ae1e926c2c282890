/**
 * A standby router refuses every call but health checks before anything runs: `UNAVAILABLE`,
 * marked not started (a client may retry it elsewhere) and naming the leader's address in
 * `readie-leader` when it knows it, so workers report there and clients move on.
 */
import {
  Metadata,
  ResponderBuilder,
  ServerInterceptingCall,
  ServerListenerBuilder,
  status,
  type ServerInterceptor,
} from '@grpc/grpc-js';
import { LEADER_TRAILER, NOT_STARTED_TRAILER } from '../../shared/call-trailers.js';

/** What the interceptor asks the router. */
export interface StandbyGate {
  /** Whether this router serves (it leads, or its log has no leadership). */
  readonly serving: () => boolean;
  /** The leader's address, when known. */
  readonly leader: () => string | undefined;
}

/** Refuses calls while the router does not serve; health checks always pass through. */
export function standbyInterceptor(gate: StandbyGate): ServerInterceptor {
  return (method, call) => {
    if (method.path.startsWith('/grpc.health.v1.') || gate.serving()) {
      return new ServerInterceptingCall(call);
    }
    const listener = new ServerListenerBuilder()
      .withOnReceiveMetadata(() => {
        const leader = gate.leader();
        const trailers = new Metadata();
        trailers.set(NOT_STARTED_TRAILER, '1');
        if (leader !== undefined) trailers.set(LEADER_TRAILER, leader);
        call.sendStatus({
          code: status.UNAVAILABLE,
          details:
            leader === undefined
              ? 'this router is a standby and no router leads yet: retry shortly, or at another router'
              : `this router is a standby: the leader is ${leader}`,
          metadata: trailers,
        });
      })
      .build();
    const responder = new ResponderBuilder().withStart((next) => next(listener)).build();
    return new ServerInterceptingCall(call, responder);
  };
}
