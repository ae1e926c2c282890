/**
 * The server interceptor in front of every router service: it authenticates each call's bearer
 * token into a Principal and refuses, before any handler runs, a caller it does not know
 * (`UNAUTHENTICATED`) or one whose credential does not serve that service (`PERMISSION_DENIED`,
 * see `access-policy.ts`). The standard health service stays open. Handlers that need to know who
 * is calling (which tenant, which worker) ask `RouterCredentials.authenticate` again.
 */
import {
  Metadata,
  ResponderBuilder,
  ServerInterceptingCall,
  ServerListenerBuilder,
  status,
  type ServerInterceptor,
} from '@grpc/grpc-js';
import { AUTHORIZATION, bearerValue } from '../../shared/bearer-token.js';
import { NOT_STARTED_TRAILER } from '../../shared/call-trailers.js';
import { isOpenPath } from './access-policy.js';
import { PermissionDeniedError, UnauthenticatedError } from './errors.js';
import type { RouterCredentials } from './router-credentials.js';

/** A refusal the interceptor made, for logs and metrics (never the token). */
export interface Refusal {
  readonly path: string;
  readonly code: 'UNAUTHENTICATED' | 'PERMISSION_DENIED';
  readonly problem: string;
}

/** An interceptor refusing calls whose credentials do not allow them; `onRefused` hears each. */
export function credentialInterceptor(
  credentials: RouterCredentials,
  onRefused: (refusal: Refusal) => void,
): ServerInterceptor {
  return (method, call) => {
    if (isOpenPath(method.path)) return new ServerInterceptingCall(call);
    const listener = new ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        try {
          credentials.authorize(metadata, method.path);
        } catch (error) {
          if (!(error instanceof UnauthenticatedError || error instanceof PermissionDeniedError)) {
            throw error;
          }
          onRefused({ path: method.path, code: error.code, problem: error.message });
          // Refused before anything ran (src/shared/call-trailers.ts).
          const trailers = new Metadata();
          trailers.set(NOT_STARTED_TRAILER, '1');
          call.sendStatus({ code: status[error.code], details: error.message, metadata: trailers });
          return;
        }
        next(metadata);
      })
      .build();
    const responder = new ResponderBuilder().withStart((next) => next(listener)).build();
    return new ServerInterceptingCall(call, responder);
  };
}

/** Metadata presenting `token` as a bearer token (empty without one). */
export function bearerMetadata(token: string | undefined): Metadata {
  const metadata = new Metadata();
  if (token !== undefined && token !== '') metadata.set(AUTHORIZATION, bearerValue(token));
  return metadata;
}
