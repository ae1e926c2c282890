/**
 * Where the cluster is and how to reach it. Options win over the environment: `READIE_ADDRESS`
 * (`host:port`, or a comma-separated list of routers' `host:port`: src/client/router-list.ts; required), `READIE_INSECURE` (`1` for a plaintext local cluster; TLS otherwise),
 * `READIE_CA_FILE` (PEM roots to trust instead of the system's), `READIE_AUTH_TOKEN` (sent as
 * `authorization: Bearer <token>`). The same variables as the Python client.
 */
import { readFileSync } from 'node:fs';
import { credentials, Metadata, type ChannelCredentials } from '@grpc/grpc-js';
import { ConfigurationError } from './errors.js';

/** How to reach the router; anything left out comes from the environment. */
export interface ConnectionOptions {
  /**
   * `host:port` of the router (or of nginx in front of it), or several routers' (a list, or one
   * comma-separated string): a call a standby refuses moves to the leader. Default: READIE_ADDRESS.
   */
  readonly address?: string | readonly string[];
  /** Plaintext instead of TLS, for a local cluster. Default: READIE_INSECURE. */
  readonly insecure?: boolean;
  /** A PEM file of root certificates to trust. Default: READIE_CA_FILE, else the system's roots. */
  readonly caFile?: string;
  /** PEM root certificates to trust, instead of a file. */
  readonly rootCerts?: Buffer;
  /** The router's token. Default: READIE_AUTH_TOKEN. */
  readonly token?: string;
  /** Where the defaults are read from. Default: `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** The settings in force, resolved. */
export interface Connection {
  /** The first router's address (the one errors name when the list has one). */
  readonly address: string;
  /** Every router's address, in the order given (at least one). */
  readonly addresses: readonly string[];
  readonly insecure: boolean;
  readonly rootCerts: Buffer | undefined;
  readonly token: string | undefined;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['', '0', 'false', 'no', 'off']);

function flag(name: string, text: string): boolean {
  const value = text.trim().toLowerCase();
  if (TRUE.has(value)) return true;
  if (FALSE.has(value)) return false;
  throw new ConfigurationError(`${name}=${JSON.stringify(text)} is not a flag (use 1 or 0)`);
}

/** Resolves options and environment into the settings in force; throws ConfigurationError. */
export function resolveConnection(options: ConnectionOptions = {}): Connection {
  const env = options.env ?? process.env;
  const given = options.address ?? env.READIE_ADDRESS ?? '';
  const addresses = (typeof given === 'string' ? given.split(',') : given)
    .map((address) => address.trim())
    .filter((address) => address !== '');
  const address = addresses[0];
  if (address === undefined) {
    throw new ConfigurationError(
      'no cluster address: set READIE_ADDRESS=host:port (and READIE_INSECURE=1 for a local ' +
        'cluster without TLS) or pass { address }',
    );
  }
  const insecure = options.insecure ?? flag('READIE_INSECURE', env.READIE_INSECURE ?? '');
  let rootCerts = options.rootCerts;
  const caFile = options.caFile ?? (env.READIE_CA_FILE || undefined);
  if (rootCerts === undefined && caFile !== undefined && !insecure) {
    try {
      rootCerts = readFileSync(caFile);
    } catch (cause) {
      throw new ConfigurationError(
        `cannot read the CA file ${caFile} (READIE_CA_FILE): ${String(cause)}`,
        { cause },
      );
    }
  }
  const token = options.token ?? (env.READIE_AUTH_TOKEN || undefined);
  return { address, addresses: [...new Set(addresses)], insecure, rootCerts, token };
}

/** The channel credentials of a connection: TLS unless insecure. */
export function channelCredentials(connection: Connection): ChannelCredentials {
  return connection.insecure
    ? credentials.createInsecure()
    : credentials.createSsl(connection.rootCerts ?? null);
}

/** The metadata of every call: the bearer token when there is one. */
export function callMetadata(connection: Connection): Metadata {
  const metadata = new Metadata();
  if (connection.token !== undefined) metadata.set('authorization', `Bearer ${connection.token}`);
  return metadata;
}
