/**
 * Router auth (READIE_AUTH_TOKEN): the worker sends `authorization: Bearer <token>` on its
 * RegistryService calls and requires it on ExecutionService calls.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { UnauthenticatedError } from './errors.js';

/** The metadata key carrying the token. */
export const AUTHORIZATION = 'authorization';

/** Metadata carrying `token`, or empty metadata without one. */
export function authMetadata(token: string | null): Metadata {
  const metadata = new Metadata();
  if (token) metadata.set(AUTHORIZATION, `Bearer ${token}`);
  return metadata;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Throws UnauthenticatedError unless `metadata` carries `token` (compared in constant time). */
export function requireToken(metadata: Metadata, token: string | null): void {
  if (!token) return;
  const presented = metadata.get(AUTHORIZATION)[0];
  const text = typeof presented === 'string' ? presented : '';
  // Hashing first makes both sides the same length, so the comparison leaks nothing either.
  if (!timingSafeEqual(digest(text), digest(`Bearer ${token}`))) {
    throw new UnauthenticatedError(
      text === ''
        ? 'this worker requires the router token: send "authorization: Bearer <READIE_AUTH_TOKEN>"'
        : "the authorization token does not match this worker's READIE_AUTH_TOKEN",
    );
  }
}
