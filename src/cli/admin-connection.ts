/**
 * How the operator commands (`readie status`, `readie pin`) reach the router's AdminService: the
 * routers' addresses (`--router`, else READIE_ADDRESS, else those `readie up` recorded under
 * `--state-dir`, else 127.0.0.1:50051; a comma-separated list follows the leader), TLS or
 * plaintext (`--insecure`, `--ca-file`, else the clients' variables; a local cluster's recorded
 * routers are plaintext on loopback) and an operator credential: `--token-file`, else READIE_OPERATOR_TOKEN,
 * else `<state-dir>/credentials/operator.token` of a cluster `readie up` started. The tenant's
 * READIE_AUTH_TOKEN is never sent: it names a tenant, and `readie up` prints it for clients.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolveConnection, type Connection } from '../client/connection.js';
import { ConfigurationError } from '../client/errors.js';
import { readLocalAddress } from '../cluster/local-address.js';
import { localOperatorTokenPath } from '../cluster/local-credentials.js';

/** The variable an operator token may come from. */
export const OPERATOR_TOKEN_VARIABLE = 'READIE_OPERATOR_TOKEN';

/** The flags every operator command takes. */
export interface AdminConnectionFlags {
  readonly router?: string;
  readonly insecure?: boolean;
  readonly caFile?: string;
  readonly tokenFile?: string;
  readonly stateDir: string;
}

/** Where the operator credential came from, in words for a message (null: none was found). */
export type OperatorCredentialSource = string | null;

/** An operator command's connection, and where its credential came from. */
export interface AdminConnection extends Connection {
  readonly credentialSource: OperatorCredentialSource;
}

/** A local cluster's operator token file under `--state-dir`, if there is one. */
export function localOperatorTokenFile(flags: AdminConnectionFlags): string | null {
  const path = localOperatorTokenPath(flags.stateDir);
  return existsSync(path) ? path : null;
}

function firstLine(file: string): string {
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

/** The operator token and its source: `--token-file`, READIE_OPERATOR_TOKEN, a local cluster's. */
function operatorToken(
  flags: AdminConnectionFlags,
  env: NodeJS.ProcessEnv,
): { token: string | undefined; source: OperatorCredentialSource } {
  if (flags.tokenFile !== undefined) {
    return { token: firstLine(flags.tokenFile), source: `--token-file ${flags.tokenFile}` };
  }
  const variable = env[OPERATOR_TOKEN_VARIABLE]?.trim();
  if (variable) return { token: variable, source: OPERATOR_TOKEN_VARIABLE };
  const local = localOperatorTokenFile(flags);
  if (local !== null) return { token: firstLine(local), source: `the local cluster's ${local}` };
  return { token: undefined, source: null };
}

/**
 * What to add to a refused credential's message: the local cluster's operator token file when the
 * token came from elsewhere, and that READIE_AUTH_TOKEN (a tenant's) is never an operator's.
 */
export function credentialHint(
  flags: AdminConnectionFlags,
  connection: AdminConnection,
  env: NodeJS.ProcessEnv,
): string {
  const local = localOperatorTokenFile(flags);
  const parts: string[] = [];
  if (local !== null && connection.credentialSource?.endsWith(local) !== true) {
    parts.push(`a local cluster's is ${local} (--token-file ${local})`);
  }
  if (connection.credentialSource === null && env.READIE_AUTH_TOKEN) {
    parts.push(
      'READIE_AUTH_TOKEN is a tenant token (the one readie up prints for clients) and is never sent by operator commands',
    );
  }
  return parts.map((part) => `; ${part}`).join('');
}

/** The connection the flags and the environment describe (ConfigurationError when they cannot). */
export function adminConnection(
  flags: AdminConnectionFlags,
  env: NodeJS.ProcessEnv,
): AdminConnection {
  const { token, source } = operatorToken(flags, env);
  // The clients' variables, but never the tenant's token (resolveConnection would fall back to it).
  const clientEnv = { ...env, READIE_AUTH_TOKEN: undefined };
  const given = flags.router ?? env.READIE_ADDRESS;
  // A local cluster's routers (readie up) listen in plaintext on loopback.
  const local = given === undefined ? readLocalAddress(flags.stateDir) : null;
  const connection = resolveConnection({
    address: given ?? local ?? '127.0.0.1:50051',
    ...(flags.insecure || (local !== null && env.READIE_INSECURE === undefined)
      ? { insecure: true }
      : {}),
    ...(flags.caFile === undefined ? {} : { caFile: flags.caFile }),
    ...(token === undefined ? {} : { token }),
    env: clientEnv,
  });
  return { ...connection, credentialSource: source };
}

/** `--router`'s help, the same for every operator command. */
export const ROUTER_FLAG_HELP =
  "the router's address, or nginx's in front of it; a comma-separated list follows the one that leads (default: READIE_ADDRESS, else the routers of a local cluster under --state-dir, else 127.0.0.1:50051)";

/** `--token-file`'s help, the same for every operator command. */
export const TOKEN_FILE_FLAG_HELP =
  "an operator token (first line); default: READIE_OPERATOR_TOKEN, else <state-dir>/credentials/operator.token of a local cluster (the tenant's READIE_AUTH_TOKEN is never sent)";
