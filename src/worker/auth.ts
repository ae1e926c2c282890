/**
 * Router auth (READIE_AUTH_TOKEN): the worker sends `authorization: Bearer <token>` on its
 * RegistryService calls and requires it on ExecutionService calls. The check itself (constant
 * time) is shared with the router: `src/shared/bearer-token.ts`.
 */
import { Metadata } from '@grpc/grpc-js';
import { AUTHORIZATION, bearerTokenProblem, bearerValue } from '../shared/bearer-token.js';
import { UnauthenticatedError } from './errors.js';

/** Metadata carrying `token`, or empty metadata without one. */
export function authMetadata(token: string | null): Metadata {
  const metadata = new Metadata();
  if (token) metadata.set(AUTHORIZATION, bearerValue(token));
  return metadata;
}

/** Throws UnauthenticatedError unless `metadata` carries `token` (and nothing else). */
export function requireToken(metadata: Metadata, token: string | null): void {
  if (!token) return;
  switch (bearerTokenProblem(metadata.get(AUTHORIZATION), token)) {
    case null:
      return;
    case 'missing':
      throw new UnauthenticatedError(
        'this worker requires the router token: send "authorization: Bearer <READIE_AUTH_TOKEN>"',
      );
    case 'wrong':
      throw new UnauthenticatedError(
        "the authorization token does not match this worker's READIE_AUTH_TOKEN",
      );
  }
}
