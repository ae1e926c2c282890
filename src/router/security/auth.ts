/**
 * Bearer-token authentication. With `READIE_AUTH_TOKEN` set, every call to the router's services
 * must carry `authorization: Bearer <token>`, else `UNAUTHENTICATED`; the health service stays open
 * so load balancers and orchestrators can probe it. Tokens are compared in constant time (as
 * SHA-256 digests, so neither content nor length leaks through timing).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import {
  Metadata,
  ResponderBuilder,
  ServerInterceptingCall,
  ServerListenerBuilder,
  status,
  type ServerInterceptor,
} from '@grpc/grpc-js';

/** The metadata key carrying the token. */
export const AUTHORIZATION = 'authorization';

/** Paths reachable without a token: the standard health service. */
const OPEN_PATHS = /^\/grpc\.health\.v1\.Health\//;

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Why a call's metadata does not authenticate it, or null when it does. */
export function authenticationProblem(metadata: Metadata, token: string): string | null {
  const values = metadata.get(AUTHORIZATION);
  const value = values[0];
  if (value === undefined) {
    return 'missing bearer token: send metadata "authorization: Bearer <READIE_AUTH_TOKEN>"';
  }
  const text = typeof value === 'string' ? value : value.toString('utf8');
  const expected = digest(`Bearer ${token}`);
  return values.length === 1 && timingSafeEqual(digest(text), expected)
    ? null
    : 'wrong bearer token: the "authorization" metadata does not carry the router\'s token';
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
  if (token !== undefined && token !== '') metadata.set(AUTHORIZATION, `Bearer ${token}`);
  return metadata;
}
