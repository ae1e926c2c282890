/**
 * Bearer-token authentication. With `READIE_AUTH_TOKEN` set, every call to the router's services
 * must carry `authorization: Bearer <token>`, else `UNAUTHENTICATED`; the health service stays open
 * so load balancers and orchestrators can probe it. The check itself (constant time) is shared with
 * the worker: `src/shared/bearer-token.ts`.
 */
import {
  Metadata,
  ResponderBuilder,
  ServerInterceptingCall,
  ServerListenerBuilder,
  status,
  type ServerInterceptor,
} from '@grpc/grpc-js';
import { AUTHORIZATION, bearerTokenProblem, bearerValue } from '../../shared/bearer-token.js';

/** Paths reachable without a token: the standard health service. */
const OPEN_PATHS = /^\/grpc\.health\.v1\.Health\//;

/** Why a call's metadata does not authenticate it, or null when it does. */
export function authenticationProblem(metadata: Metadata, token: string): string | null {
  switch (bearerTokenProblem(metadata.get(AUTHORIZATION), token)) {
    case null:
      return null;
    case 'missing':
      return 'missing bearer token: send metadata "authorization: Bearer <READIE_AUTH_TOKEN>"';
    case 'wrong':
      return 'wrong bearer token: the "authorization" metadata does not carry the router\'s token';
  }
}

/**
 * A server interceptor refusing calls without the token with `UNAUTHENTICATED`. `onRefused` is
 * told each refusal (for logs and metrics; never the token).
 */
export function bearerTokenInterceptor(
  token: string,
  onRefused: (path: string, problem: string) => void,
): ServerInterceptor {
  return (method, call) => {
    if (OPEN_PATHS.test(method.path)) return new ServerInterceptingCall(call);
    const listener = new ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const problem = authenticationProblem(metadata, token);
        if (problem === null) {
          next(metadata);
          return;
        }
        onRefused(method.path, problem);
        call.sendStatus({ code: status.UNAUTHENTICATED, details: problem });
      })
      .build();
    const responder = new ResponderBuilder().withStart((next) => next(listener)).build();
    return new ServerInterceptingCall(call, responder);
  };
}

/** Metadata carrying the token, for the router's own calls to workers (empty without a token). */
export function bearerMetadata(token: string | undefined): Metadata {
  const metadata = new Metadata();
  if (token !== undefined && token !== '') metadata.set(AUTHORIZATION, bearerValue(token));
  return metadata;
}
