/**
 * The worker's credentials (docs/security.md). In the tokens mode it holds two files: its own
 * token, which it presents on every RegistryService report and which names this one worker, and
 * the router's token (or its `sha256:` digest; several lines while one is rotated), the only
 * credential its ExecutionService accepts. A client's token, another worker's or its own is
 * refused. `--auth single-token` (READIE_AUTH_TOKEN both ways) and `--auth none` are development
 * shortcuts. `reload` (SIGHUP in `readie worker`) reads both files again; a bad file keeps the
 * credentials in force.
 */
import { readFileSync } from 'node:fs';
import { Metadata } from '@grpc/grpc-js';
import {
  acceptedDigests,
  AUTHORIZATION,
  bearerValue,
  presentedToken,
  tokenDigest,
  tokenToPresent,
  TokenSyntaxError,
} from '../shared/bearer-token.js';
import { NotTheRouterError, UnauthenticatedError, WorkerStartupError } from './core/errors.js';
import { secretFileExposure } from '../host/secret-file.js';

/** How the worker authenticates to the router and the router to it. */
export type WorkerAuth =
  | { readonly mode: 'tokens'; readonly tokenFile: string; readonly routerTokenFile: string }
  | { readonly mode: 'single-token'; readonly token: string }
  | { readonly mode: 'none' };

/** What the tokens mode holds once its files are read. */
interface Loaded {
  /** The worker's own token, presented to the router. */
  readonly ownToken: string;
  /** Digests of the router credentials ExecutionService accepts. */
  readonly routerDigests: ReadonlySet<string>;
  readonly warnings: readonly string[];
}

function readCredentialFile(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new WorkerStartupError(`${flag} ${path}: cannot read it (${(error as Error).message})`);
  }
}

function withFlag<T>(flag: string, path: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof TokenSyntaxError) {
      throw new WorkerStartupError(`${flag} ${path}: ${error.message}`);
    }
    throw error;
  }
}

function loadTokens(auth: Extract<WorkerAuth, { mode: 'tokens' }>): Loaded {
  const ownToken = withFlag('--token-file', auth.tokenFile, () =>
    tokenToPresent(readCredentialFile(auth.tokenFile, '--token-file')),
  );
  const routerDigests = withFlag('--router-token-file', auth.routerTokenFile, () =>
    acceptedDigests(readCredentialFile(auth.routerTokenFile, '--router-token-file')),
  );
  if (routerDigests.includes(tokenDigest(ownToken))) {
    throw new WorkerStartupError(
      "--token-file and --router-token-file hold the same token: the router's credential must be its own",
    );
  }
  const warnings = [
    secretFileExposure(auth.tokenFile, '--token-file', 'worker'),
    secretFileExposure(auth.routerTokenFile, '--router-token-file', 'worker'),
  ].filter((warning): warning is string => warning !== null);
  return { ownToken, routerDigests: new Set(routerDigests), warnings };
}

/** The worker's credentials in force. */
export class WorkerCredentials {
  private loaded: Loaded | null = null;
  private readonly sharedDigest: string | null;

  /** Reads the files `auth` names; throws WorkerStartupError naming the flag and the file. */
  constructor(private readonly auth: WorkerAuth) {
    this.sharedDigest = auth.mode === 'single-token' ? tokenDigest(auth.token) : null;
    this.reload();
  }

  /** The authentication mode. */
  get mode(): WorkerAuth['mode'] {
    return this.auth.mode;
  }

  /** Things an operator should fix (a token file others may read). */
  get warnings(): readonly string[] {
    return this.loaded?.warnings ?? [];
  }

  /** Reads the files again; throws WorkerStartupError and keeps the old ones when they are bad. */
  reload(): void {
    if (this.auth.mode === 'tokens') this.loaded = loadTokens(this.auth);
  }

  /** Metadata for a report to the router: this worker's own credential (none without auth). */
  reportMetadata(): Metadata {
    const metadata = new Metadata();
    const token = this.auth.mode === 'single-token' ? this.auth.token : this.loaded?.ownToken;
    if (token !== undefined) metadata.set(AUTHORIZATION, bearerValue(token));
    return metadata;
  }

  /**
   * Throws unless `metadata` presents the router's credential: UnauthenticatedError for none or
   * an unknown one, NotTheRouterError for this worker's own token.
   */
  checkRouter(metadata: Metadata): void {
    if (this.auth.mode === 'none') return;
    const presented = presentedToken(metadata.get(AUTHORIZATION));
    if (presented.kind === 'missing') {
      throw new UnauthenticatedError(
        'this worker takes calls from the router alone: send "authorization: Bearer <router token>"',
      );
    }
    if (presented.kind === 'token') {
      if (this.sharedDigest !== null && presented.digest === this.sharedDigest) return;
      const loaded = this.loaded;
      if (loaded?.routerDigests.has(presented.digest)) return;
      if (loaded && presented.digest === tokenDigest(loaded.ownToken)) {
        throw new NotTheRouterError(
          "this is the worker's own credential, for its reports to the router: only the router's credential may call ExecutionService",
        );
      }
    }
    throw new UnauthenticatedError(
      "the authorization token is not the router's credential that this worker accepts",
    );
  }
}
