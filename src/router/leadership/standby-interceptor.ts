/**
 * A standby router refuses every call but health checks before anything runs: `UNAVAILABLE`,
 * marked not started (a client may retry it elsewhere) and standby (`readie-standby: 1`), naming the leader's address in
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
import {
  LEADER_TRAILER,
  NOT_STARTED_TRAILER,
  STANDBY_TRAILER,
} from '../../shared/call-trailers.js';

/** What the interceptor asks the router. */
export interface StandbyGate {
  /** Whether this router serves (it leads, or its log has no leadership). */
  readonly serving: () => boolean;
  /** The leader's address, when known. */
  readonly leader: () => string | undefined;
}

/** A standby's refusal (UNAVAILABLE): its message and trailers, the same on every transport. */
export interface StandbyRefusal {
  readonly details: string;
  readonly trailers: Readonly<Record<string, string>>;
}

/** What a router that does not serve answers a call, naming the leader when it knows it. */
export function standbyRefusal(gate: StandbyGate): StandbyRefusal {
  const leader = gate.leader();
  return {
    details:
      leader === undefined
        ? 'this router is a standby and no router leads yet: retry shortly, or at another router'
        : `this router is a standby: the leader is ${leader}`,
    trailers: {
      [NOT_STARTED_TRAILER]: '1',
      [STANDBY_TRAILER]: '1',
      ...(leader === undefined ? {} : { [LEADER_TRAILER]: leader }),
    },
  };
}

/** Refuses calls while the router does not serve; health checks always pass through. */
export function standbyInterceptor(gate: StandbyGate): ServerInterceptor {
  return (method, call) => {
    if (method.path.startsWith('/grpc.health.v1.') || gate.serving()) {
      return new ServerInterceptingCall(call);
    }
    const listener = new ServerListenerBuilder()
      .withOnReceiveMetadata(() => {
        const refusal = standbyRefusal(gate);
        const trailers = new Metadata();
        for (const [key, value] of Object.entries(refusal.trailers)) trailers.set(key, value);
        call.sendStatus({ code: status.UNAVAILABLE, details: refusal.details, metadata: trailers });
      })
      .build();
    const responder = new ResponderBuilder().withStart((next) => next(listener)).build();
    return new ServerInterceptingCall(call, responder);
  };
}
