/**
 * How the operator commands (`readie status`, `readie pin`) reach the router's AdminService: the
 * address (`--router`, else READIE_ADDRESS, else the local cluster's 127.0.0.1:50051), TLS or
 * plaintext (`--insecure`, `--ca-file`, else the clients' variables) and an operator token
 * (`--token-file`, else READIE_AUTH_TOKEN, else `<state-dir>/credentials/operator.token` of a
 * cluster `readie up` started).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolveConnection, type Connection } from '../client/connection.js';
import { ConfigurationError } from '../client/errors.js';
import { localOperatorTokenPath } from '../cluster/local-credentials.js';

/** The flags every operator command takes. */
export interface AdminConnectionFlags {
  readonly router?: string;
  readonly insecure?: boolean;
  readonly caFile?: string;
  readonly tokenFile?: string;
  readonly stateDir: string;
}

/** A local cluster's operator token file under `--state-dir`, if there is one. */
export function localOperatorTokenFile(flags: AdminConnectionFlags): string | null {
  const path = localOperatorTokenPath(flags.stateDir);
  return existsSync(path) ? path : null;
}

/**
 * What to add to a refused credential's message: the local cluster's operator token file when the
 * token came from elsewhere (the environment `readie up` prints sets a tenant's).
 */
export function localTokenHint(flags: AdminConnectionFlags): string {
  const local = flags.tokenFile === undefined ? localOperatorTokenFile(flags) : null;
  return local === null ? '' : `; a local cluster's is ${local} (--token-file ${local})`;
}

/** The operator token: `--token-file`, else READIE_AUTH_TOKEN, else a local cluster's. */
function operatorToken(flags: AdminConnectionFlags, env: NodeJS.ProcessEnv): string | undefined {
  const file =
    flags.tokenFile ??
    (env.READIE_AUTH_TOKEN ? undefined : (localOperatorTokenFile(flags) ?? undefined));
  if (file === undefined) return env.READIE_AUTH_TOKEN || undefined;
  let token: string | undefined;
  try {
    token = readFileSync(file, 'utf8').split(/\r?\n/)[0]?.trim() || undefined;
  } catch (error) {
    throw new ConfigurationError(
      `--token-file ${file}: cannot read it (${(error as Error).message})`,
    );
  }
  if (token === undefined) throw new ConfigurationError(`--token-file ${file}: it is empty`);
  return token;
}

/** The connection the flags and the environment describe (ConfigurationError when they cannot). */
export function adminConnection(flags: AdminConnectionFlags, env: NodeJS.ProcessEnv): Connection {
  const token = operatorToken(flags, env);
  return resolveConnection({
    address: flags.router ?? env.READIE_ADDRESS ?? '127.0.0.1:50051',
    ...(flags.insecure ? { insecure: true } : {}),
    ...(flags.caFile === undefined ? {} : { caFile: flags.caFile }),
    ...(token === undefined ? {} : { token }),
    env,
  });
}
