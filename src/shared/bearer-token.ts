/**
 * Bearer tokens as the router and the worker send and check them: the value `Bearer <token>` in
 * the `authorization` metadata. Tokens are recognised by their SHA-256 digest, never compared as
 * text: a presented token is hashed first and the digest looked up, so how long a lookup takes
 * says nothing about any stored token, and a file of digests (`sha256:<hex>`) authenticates
 * without holding a single usable secret.
 */
import { createHash } from 'node:crypto';

/** The metadata key carrying the token. */
export const AUTHORIZATION = 'authorization';

/** The prefix of a token written as its digest in a credentials file. */
export const DIGEST_PREFIX = 'sha256:';

/** The fewest characters a token written in clear may have: shorter ones are guessable. */
export const MIN_TOKEN_LENGTH = 16;

/** What the `authorization` metadata of a call presented. */
export type PresentedToken =
  | { readonly kind: 'token'; readonly digest: string }
  | { readonly kind: 'missing' }
  | { readonly kind: 'malformed' };

/** The `authorization` value that carries `token`. */
export function bearerValue(token: string): string {
  return `Bearer ${token}`;
}

/** The digest a token is known by: `sha256:` and 64 lowercase hex digits of its UTF-8 bytes. */
export function tokenDigest(token: string | Uint8Array): string {
  return `${DIGEST_PREFIX}${createHash('sha256').update(token).digest('hex')}`;
}

/**
 * Reads the `authorization` values a call presented: exactly one `Bearer <token>` is a token
 * (known only by its digest from here on); none is missing; anything else is malformed.
 */
export function presentedToken(values: readonly (string | Uint8Array)[]): PresentedToken {
  const value = values[0];
  if (value === undefined) return { kind: 'missing' };
  if (values.length !== 1 || typeof value !== 'string') return { kind: 'malformed' };
  const match = /^Bearer (.+)$/s.exec(value);
  if (!match) return { kind: 'malformed' };
  return { kind: 'token', digest: tokenDigest(match[1]!) };
}

/**
 * Reads one credential as a file writes it: a token in clear (at least `MIN_TOKEN_LENGTH`
 * characters, no whitespace) or its digest (`sha256:` and 64 hex digits). Returns the digest, or
 * throws a TokenSyntaxError saying what is wrong (never echoing the text).
 */
export function credentialDigest(text: string): string {
  if (text.startsWith(DIGEST_PREFIX)) {
    const hex = text.slice(DIGEST_PREFIX.length);
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
      throw new TokenSyntaxError(`a digest is "${DIGEST_PREFIX}" and 64 hex digits`);
    }
    return `${DIGEST_PREFIX}${hex.toLowerCase()}`;
  }
  if (/\s/.test(text)) throw new TokenSyntaxError('a token has no whitespace');
  if (text.length < MIN_TOKEN_LENGTH) {
    throw new TokenSyntaxError(
      `a token has at least ${MIN_TOKEN_LENGTH} characters (this one has ${text.length}); ` +
        'generate one with `openssl rand -hex 32`',
    );
  }
  return tokenDigest(text);
}

/**
 * A token to present, read from a file's text: its first non-empty line, trimmed, which must be a
 * token in clear (a digest cannot be presented). Throws TokenSyntaxError otherwise.
 */
export function tokenToPresent(text: string): string {
  const token = firstLine(text);
  if (token === undefined) throw new TokenSyntaxError('the file holds no token');
  if (token.startsWith(DIGEST_PREFIX)) {
    throw new TokenSyntaxError('it holds a digest: a token to present must be in clear');
  }
  credentialDigest(token);
  return token;
}

/** The digests of a file that lists accepted credentials, one a line (`#` lines are comments). */
export function acceptedDigests(text: string): string[] {
  const digests: string[] = [];
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = stripComment(raw);
    if (line === '') continue;
    try {
      digests.push(credentialDigest(line));
    } catch (error) {
      if (error instanceof TokenSyntaxError) {
        throw new TokenSyntaxError(`line ${index + 1}: ${error.message}`);
      }
      throw error;
    }
  }
  if (digests.length === 0) throw new TokenSyntaxError('the file lists no token');
  return digests;
}

/** A line trimmed, or empty when it is a comment (its first character other than a blank is `#`). */
export function stripComment(line: string): string {
  const trimmed = line.trim();
  return trimmed.startsWith('#') ? '' : trimmed;
}

function firstLine(text: string): string | undefined {
  return text
    .split(/\r?\n/)
    .map(stripComment)
    .find((line) => line !== '');
}

/** A credential as written is not one readie accepts; the message says why, never the secret. */
export class TokenSyntaxError extends Error {
  override readonly name = 'TokenSyntaxError';
}
