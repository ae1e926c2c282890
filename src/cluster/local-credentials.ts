/**
 * The credentials of one `readie up` run, made fresh each start: a client token (tenant `local`),
 * an operator token, a token per worker and the router's own token, each 256 random bits. Written
 * under `<state>/credentials/` (0700), every file 0600: the router's tokens file holds only
 * digests, and the workers accept the router by its digest, so the only files holding a usable
 * secret are those of its one holder.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { tokenDigest } from '../shared/bearer-token.js';

/** The tenant the local client token names. */
export const LOCAL_TENANT = 'local';
/** The operator the local operator token names. */
export const LOCAL_OPERATOR = 'local-operator';

/** Where one run's credentials are, and the tokens a user needs. */
export interface LocalCredentials {
  /** `<state>/credentials`. */
  readonly dir: string;
  /** The router's `--tokens-file` (digests of the client, operator and worker tokens). */
  readonly tokensFile: string;
  /** The router's `--router-token-file` (its own token, in clear). */
  readonly routerTokenFile: string;
  /** Every worker's `--router-token-file` (the router token's digest). */
  readonly routerDigestFile: string;
  /** Each worker's `--token-file`, by worker ID. */
  readonly workerTokenFiles: ReadonlyMap<string, string>;
  /** The client token (`READIE_AUTH_TOKEN` for clients), also in `client.token`. */
  readonly clientToken: string;
  readonly clientTokenFile: string;
  /** The operator token, also in `operator.token`. */
  readonly operatorToken: string;
  readonly operatorTokenFile: string;
}

/** A new random token: 64 hex digits. */
export function newToken(): string {
  return randomBytes(32).toString('hex');
}

/** A directory that is 0700 whatever the umask or an earlier run left. */
function privateDir(path: string): string {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
  return path;
}

/** Writes `text` to a new file created 0600 (an older file of that name is replaced). */
function privateFile(path: string, text: string): string {
  rmSync(path, { force: true });
  writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
  return path;
}

/** Where a local cluster under `stateDir` keeps its operator token (what operator commands read). */
export function localOperatorTokenPath(stateDir: string): string {
  return resolve(stateDir, 'credentials', 'operator.token');
}

/**
 * Makes and writes a run's credentials for the workers `workerIds`. `extraLines` (the text of a
 * tokens file the user gave, checked already) is appended to the router's tokens file, so the
 * tenants and operators it names authenticate too.
 */
export function writeLocalCredentials(
  stateDir: string,
  workerIds: readonly string[],
  extraLines = '',
): LocalCredentials {
  const dir = privateDir(resolve(stateDir, 'credentials'));
  // An earlier run's worker tokens go: a worker of that run must not authenticate with this one.
  const workersDir = resolve(dir, 'workers');
  rmSync(workersDir, { recursive: true, force: true });
  privateDir(workersDir);
  const clientToken = newToken();
  const operatorToken = newToken();
  const routerToken = newToken();
  const workerTokens = new Map(workerIds.map((id) => [id, newToken()]));
  const lines = [
    '# readie up: the credentials of this run (made at its start). KIND NAME TOKEN-DIGEST',
    `tenant ${LOCAL_TENANT} ${tokenDigest(clientToken)}`,
    `operator ${LOCAL_OPERATOR} ${tokenDigest(operatorToken)}`,
    ...[...workerTokens].map(([id, token]) => `worker ${id} ${tokenDigest(token)}`),
    ...(extraLines.trim() === ''
      ? []
      : ['# readie up --tokens-file: the credentials it was given', extraLines.trimEnd()]),
  ];
  const workerTokenFiles = new Map(
    [...workerTokens].map(([id, token]) => [
      id,
      privateFile(resolve(workersDir, `${id}.token`), `${token}\n`),
    ]),
  );
  return {
    dir,
    tokensFile: privateFile(resolve(dir, 'tokens'), `${lines.join('\n')}\n`),
    routerTokenFile: privateFile(resolve(dir, 'router.token'), `${routerToken}\n`),
    routerDigestFile: privateFile(resolve(dir, 'router.sha256'), `${tokenDigest(routerToken)}\n`),
    workerTokenFiles,
    clientToken,
    clientTokenFile: privateFile(resolve(dir, 'client.token'), `${clientToken}\n`),
    operatorToken,
    operatorTokenFile: privateFile(localOperatorTokenPath(stateDir), `${operatorToken}\n`),
  };
}
