/**
 * Bearer tokens (`READIE_AUTH_TOKEN`) as the router and the worker send and check them: the value
 * `Bearer <token>` in the `authorization` metadata, compared in constant time (as SHA-256 digests,
 * so neither content nor length leaks through timing).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The metadata key carrying the token. */
export const AUTHORIZATION = 'authorization';

/** Why presented credentials do not carry the token: none sent, or not the one expected. */
export type TokenProblem = 'missing' | 'wrong';

/** The `authorization` value that carries `token`. */
export function bearerValue(token: string): string {
  return `Bearer ${token}`;
}

/**
 * Checks the `authorization` values a call presented against `token`: null when there is exactly
 * one and it carries the token, else what is wrong.
 */
export function bearerTokenProblem(
  presented: readonly (string | Uint8Array)[],
  token: string,
): TokenProblem | null {
  const value = presented[0];
  if (value === undefined) return 'missing';
  const matches = timingSafeEqual(digest(value), digest(bearerValue(token)));
  return matches && presented.length === 1 ? null : 'wrong';
}

function digest(value: string | Uint8Array): Buffer {
  return createHash('sha256').update(value).digest();
}
