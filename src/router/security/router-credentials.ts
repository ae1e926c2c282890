/**
 * The router's credentials: the tokens file of the callers it knows (tenants, workers, operators),
 * its own token that it presents to workers, and the development modes. It authenticates each
 * call's metadata into a Principal and reloads both files on request (SIGHUP in `readie router`):
 * a reload that fails keeps the credentials in force, so a typo never locks the cluster out.
 */
import { readFileSync } from 'node:fs';
import { Metadata } from '@grpc/grpc-js';
import {
  AUTHORIZATION,
  bearerValue,
  presentedToken,
  tokenDigest,
  tokenToPresent,
  TokenSyntaxError,
} from '../../shared/bearer-token.js';
import { RouterConfigError } from '../../core/errors.js';
import { accessProblem } from './access-policy.js';
import { PermissionDeniedError, TokensFileError, UnauthenticatedError } from './errors.js';
import type { ListedKind, Principal } from './principal.js';
import { parseTokensFile, type TokenTable } from './tokens-file.js';
import { secretFileExposure } from '../../host/secret-file.js';

/** How the router authenticates its callers. */
export type RouterAuth =
  /** The tokens file (`KIND NAME TOKEN` lines) and the file of the router's own token. */
  | {
      readonly mode: 'tokens';
      readonly tokensFile: string;
      /** The token the router presents to workers; none: it presents nothing. */
      readonly routerTokenFile: string | null;
    }
  /** Development only: one token for every client, worker and operator, and for the workers. */
  | { readonly mode: 'single-token'; readonly token: string }
  /** Development only: no credentials at all; anyone who reaches the port may do anything. */
  | { readonly mode: 'none' };

/** What a (re)load put in force, for the log. */
export interface CredentialsSummary {
  readonly mode: RouterAuth['mode'];
  readonly credentials: Readonly<Record<ListedKind, number>> | null;
  readonly routerToken: boolean;
  /** Things an operator should fix (a tokens file others may read, ...). */
  readonly warnings: readonly string[];
}

const ROUTER: Principal = { kind: 'router' };

/** What the tokens mode holds once its files are read. */
interface Loaded {
  readonly table: TokenTable;
  readonly routerToken: string | null;
  readonly warnings: string[];
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new TokensFileError(`${what} ${path}: cannot read it (${(error as Error).message})`);
  }
}

function loadTokens(auth: Extract<RouterAuth, { mode: 'tokens' }>): Loaded {
  const warnings: string[] = [];
  let routerToken: string | null = null;
  if (auth.routerTokenFile !== null) {
    try {
      routerToken = tokenToPresent(readText(auth.routerTokenFile, '--router-token-file'));
    } catch (error) {
      if (error instanceof TokenSyntaxError) {
        throw new TokensFileError(`--router-token-file ${auth.routerTokenFile}: ${error.message}`);
      }
      throw error;
    }
    const warning = secretFileExposure(auth.routerTokenFile, '--router-token-file', 'router');
    if (warning) warnings.push(warning);
  }
  const text = readText(auth.tokensFile, '--tokens-file');
  const table = parseTokensFile(
    text,
    auth.tokensFile,
    routerToken === null ? null : tokenDigest(routerToken),
  );
  const warning = secretFileExposure(auth.tokensFile, '--tokens-file', 'router');
  if (warning) warnings.push(warning);
  return { table, routerToken, warnings };
}

/** The router's credentials in force. */
export class RouterCredentials {
  /**
   * Metadata for every call the router makes to a worker: its own token, when it has one. Kept
   * current in place on reload; each call sends a clone of it.
   */
  readonly workerMetadata = new Metadata();
  private loaded: Loaded | null = null;
  private readonly sharedDigest: string | null;

  private constructor(private readonly auth: RouterAuth) {
    this.sharedDigest = auth.mode === 'single-token' ? tokenDigest(auth.token) : null;
  }

  /** Reads the credentials `auth` names; throws a RouterError naming the file and line. */
  static load(auth: RouterAuth): RouterCredentials {
    if (auth.mode === 'single-token' && auth.token === '') {
      throw new RouterConfigError('the single development token is empty: set READIE_AUTH_TOKEN');
    }
    const credentials = new RouterCredentials(auth);
    credentials.reload();
    return credentials;
  }

  /** The authentication mode. */
  get mode(): RouterAuth['mode'] {
    return this.auth.mode;
  }

  /**
   * Reads the files again and puts them in force, or throws (TokensFileError) and keeps what was
   * in force. The development modes have nothing to reload.
   */
  reload(): CredentialsSummary {
    const { auth } = this;
    if (auth.mode === 'tokens') this.loaded = loadTokens(auth);
    const token =
      auth.mode === 'single-token' ? auth.token : (this.loaded?.routerToken ?? undefined);
    if (token === undefined) this.workerMetadata.remove(AUTHORIZATION);
    else this.workerMetadata.set(AUTHORIZATION, bearerValue(token));
    return this.summary();
  }

  /** What is in force, for the log. */
  summary(): CredentialsSummary {
    return {
      mode: this.auth.mode,
      credentials: this.loaded?.table.counts ?? null,
      routerToken: this.workerMetadata.get(AUTHORIZATION).length > 0,
      warnings: this.loaded?.warnings ?? [],
    };
  }

  /** The tenants the tokens file names, sorted (none in the development modes). */
  tenants(): string[] {
    const names = new Set<string>();
    for (const principal of this.loaded?.table.principals.values() ?? []) {
      if (principal.kind === 'tenant') names.add(principal.tenantId);
    }
    return [...names].sort();
  }

  /**
   * Whether a credential in force names tenant `tenantId` (never in the development modes, where
   * no call has a tenant).
   */
  namesTenant(tenantId: string): boolean {
    for (const principal of this.loaded?.table.principals.values() ?? []) {
      if (principal.kind === 'tenant' && principal.tenantId === tenantId) return true;
    }
    return false;
  }

  /** Who `metadata` names; throws UnauthenticatedError when it names no one the router knows. */
  authenticate(metadata: Metadata): Principal {
    const { auth } = this;
    if (auth.mode === 'none') return { kind: 'anyone', mode: 'none' };
    const presented = presentedToken(metadata.get(AUTHORIZATION));
    switch (presented.kind) {
      case 'missing':
        throw new UnauthenticatedError(
          'missing bearer token: send metadata "authorization: Bearer <token>" ' +
            '(clients: set READIE_AUTH_TOKEN to your client token)',
        );
      case 'malformed':
        throw new UnauthenticatedError(
          'wrong bearer token: the "authorization" metadata must be exactly one "Bearer <token>"',
        );
      case 'token':
        break;
    }
    if (auth.mode === 'single-token') {
      if (presented.digest === this.sharedDigest) return { kind: 'anyone', mode: auth.mode };
    } else {
      const principal = this.loaded?.table.principals.get(presented.digest);
      if (principal) return principal;
      const routerToken = this.loaded?.routerToken;
      if (
        routerToken !== null &&
        routerToken !== undefined &&
        presented.digest === tokenDigest(routerToken)
      )
        return ROUTER;
    }
    throw new UnauthenticatedError(
      'wrong bearer token: the router knows no credential like it (was it rotated out?)',
    );
  }

  /**
   * Who `metadata` names, if they may call `path`: throws UnauthenticatedError for an unknown
   * caller and PermissionDeniedError for a known one asking for what its credential does not allow.
   */
  authorize(metadata: Metadata, path: string): Principal {
    const principal = this.authenticate(metadata);
    const problem = accessProblem(principal, path);
    if (problem !== null) throw new PermissionDeniedError(problem);
    return principal;
  }
}
