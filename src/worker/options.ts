/**
 * Resolving the worker's flags (worker-flags.ts) over their environment variables over defaults
 * into WorkerOptions. The environment and the machine's facts are passed in; relative paths
 * resolve against the working directory.
 */
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { ConfigError, parseSetting, resolveConfig, type Config } from '../shared/config.js';
import { parseHostPort } from '../shared/host-port.js';
import { parseCount, parseSize, UnitParseError } from '../shared/units.js';
import {
  DEFAULT_PIDS_LIMIT,
  DEFAULT_TMP_QUOTA,
  DEFAULT_UIDS,
  defaultCgroupParent,
  NETWORK_MODES,
  parseTmpQuota,
  parseUidRange,
  SandboxSettingError,
  type SandboxPolicy,
} from './core/sandbox/sandbox-policy.js';
import type { WorkerAuth } from './credentials.js';
import { WORKER_FLAGS, type WorkerFlagValues } from './worker-flags.js';

export { WORKER_FLAGS, type WorkerFlag, type WorkerFlagValues } from './worker-flags.js';

/** gRPC transport security. */
export type TransportSecurity =
  | { readonly insecure: true }
  | {
      readonly insecure: false;
      readonly caFile: string | null;
      readonly certFile: string;
      readonly keyFile: string;
    };

/** Everything a worker runs with. */
export interface WorkerOptions {
  readonly workerId: string;
  /** The routers' `host:port`, comma-separated (the leader and its standbys, in any order). */
  readonly router: string;
  readonly listen: string;
  /** Reported to the router; null: derived from the bound address. */
  readonly advertise: string | null;
  readonly flavor: 'cpu' | 'gpu';
  readonly memoryTotal: number;
  /** The resident budget for versions, in bytes (`--resident-memory`); null: no limit. */
  readonly residentMemory: number | null;
  readonly gpuMemoryTotal: number;
  readonly stateDir: string;
  readonly python: string;
  readonly cataloguePath: string | null;
  readonly restoreBackend: 'auto' | 'template' | 'criu';
  /** The criu binary to use (--criu); null: the installed prefix, else PATH. */
  readonly criu: string | null;
  /** Containers kept restored ahead of demand, per held checkpoint, at least. */
  readonly standbyPerCheckpoint: number;
  /** The most standbys per held checkpoint that recent demand keeps (`--standby-max`). */
  readonly standbyMax: number;
  /** Bytes tenants' images may take on disk (--image-cache-size); 0: no bound. */
  readonly imageCacheSize: number;
  readonly packageIndex: string | null;
  readonly wheelDir: string | null;
  readonly installer: 'auto' | 'pip' | 'uv';
  readonly cgroupParent: string;
  /** What every container's sandbox is: network, identities, limits, masked directories. */
  readonly sandbox: SandboxPolicy;
  readonly security: TransportSecurity;
  /** How the worker and the router authenticate to each other (docs/security.md). */
  readonly auth: WorkerAuth;
  /** The numeric settings (docs/router.md), WORKER_MAX_EXECUTORS included. */
  readonly config: Config;
}

/** Facts about the machine that supply defaults. */
export interface MachineFacts {
  readonly totalMemory: number;
}

function pick<K extends keyof WorkerFlagValues>(
  flags: WorkerFlagValues,
  env: Readonly<Record<string, string | undefined>>,
  key: K,
): string | undefined {
  const value = flags[key];
  if (typeof value === 'string' && value !== '') return value;
  if (value === true) return 'true';
  const spec = WORKER_FLAGS.find((flag) => flag.key === key)!;
  const fromEnv = env[spec.env];
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
}

function required(value: string | undefined, flag: string, envName: string): string {
  if (value === undefined) throw new ConfigError(`${flag} is required (or set ${envName})`);
  return value;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new ConfigError(`${flag} must be one of ${allowed.join(', ')}, not "${value}"`);
}

function size(value: string, flag: string): number {
  try {
    return parseSize(value);
  } catch (error) {
    if (error instanceof UnitParseError) throw new ConfigError(`${flag}: ${error.message}`);
    throw error;
  }
}

function count(value: string, flag: string): number {
  try {
    return parseCount(value);
  } catch (error) {
    if (error instanceof UnitParseError) throw new ConfigError(`${flag}: ${error.message}`);
    throw error;
  }
}

function hostPort(value: string, flag: string): string {
  try {
    parseHostPort(value);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${flag}: ${error.message}`);
    throw error;
  }
  return value;
}

/** A comma-separated list of `host:port` (the routers, leader and standbys), each checked. */
function hostPortList(value: string, flag: string): string {
  const addresses = value.split(',').map((address) => address.trim());
  for (const address of addresses) hostPort(address, flag);
  return addresses.join(',');
}

function truthy(value: string | undefined): boolean {
  return value !== undefined && !['0', 'false', 'no', ''].includes(value.toLowerCase());
}

/** The credentials from `--auth` and its files, checked; relative paths resolve here. */
function authOf(
  get: (key: keyof WorkerFlagValues) => string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): WorkerAuth {
  const mode = oneOf(get('auth') ?? 'tokens', ['tokens', 'single-token', 'none'], '--auth');
  const tokenFile = get('tokenFile');
  const routerTokenFile = get('routerTokenFile');
  if (mode === 'tokens') {
    if (tokenFile === undefined || routerTokenFile === undefined) {
      throw new ConfigError(
        'the worker needs its credentials: --token-file FILE (its own token, WORKER_TOKEN_FILE) and ' +
          "--router-token-file FILE (the router's token or digest, WORKER_ROUTER_TOKEN_FILE); see " +
          'docs/security.md. For development only: --auth single-token or --auth none',
      );
    }
    return { mode, tokenFile: resolve(tokenFile), routerTokenFile: resolve(routerTokenFile) };
  }
  if (tokenFile !== undefined || routerTokenFile !== undefined) {
    throw new ConfigError(
      `--token-file and --router-token-file are for --auth tokens, not --auth ${mode}`,
    );
  }
  if (mode === 'none') return { mode };
  const token = env['READIE_AUTH_TOKEN'];
  if (token === undefined || token === '') {
    throw new ConfigError(
      '--auth single-token needs READIE_AUTH_TOKEN, the shared development token',
    );
  }
  return { mode, token };
}

/** Resolves flags over environment variables over defaults; throws ConfigError naming the flag. */
export function resolveWorkerOptions(
  flags: WorkerFlagValues,
  env: Readonly<Record<string, string | undefined>>,
  machine: MachineFacts,
): WorkerOptions {
  const get = (key: keyof WorkerFlagValues) => pick(flags, env, key);
  const workerId = required(get('id'), '--id', 'WORKER_ID');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(workerId)) {
    throw new ConfigError(`--id "${workerId}" must be 1-63 letters, digits, ".", "_" or "-"`);
  }
  // WORKER_MAX_EXECUTORS is a shared setting: resolveConfig reads it; the flag overrides.
  const config = resolveConfig(
    env,
    flags.maxContainers !== undefined
      ? { WORKER_MAX_EXECUTORS: parseSetting('WORKER_MAX_EXECUTORS', flags.maxContainers) }
      : {},
  );
  const insecure = truthy(get('insecure'));
  const certFile = get('tlsCert') ?? null;
  const keyFile = get('tlsKey') ?? null;
  let security: TransportSecurity;
  if (insecure) security = { insecure: true };
  else {
    if (certFile === null || keyFile === null) {
      throw new ConfigError(
        'TLS needs --tls-cert and --tls-key (READIE_TLS_CERT, READIE_TLS_KEY); pass --insecure for plaintext',
      );
    }
    security = { insecure: false, caFile: get('tlsCa') ?? null, certFile, keyFile };
  }
  const advertise = get('advertise');
  const stateDir = resolve(get('stateDir') ?? `/var/lib/readie/${workerId}`);
  const memoryTotal =
    get('memory') !== undefined ? size(get('memory')!, '--memory') : machine.totalMemory;
  const residentText = get('residentMemory');
  const residentMemory =
    residentText === undefined
      ? Math.floor(memoryTotal / 2)
      : residentText.trim().toLowerCase() === 'none'
        ? null
        : size(residentText, '--resident-memory');
  return {
    workerId,
    router: hostPortList(required(get('router'), '--router', 'WORKER_ROUTER'), '--router'),
    listen: hostPort(required(get('listen'), '--listen', 'WORKER_LISTEN'), '--listen'),
    advertise: advertise === undefined ? null : hostPort(advertise, '--advertise'),
    flavor: oneOf(required(get('flavor'), '--flavor', 'WORKER_FLAVOR'), ['cpu', 'gpu'], '--flavor'),
    memoryTotal,
    residentMemory,
    gpuMemoryTotal: get('gpuMemory') !== undefined ? size(get('gpuMemory')!, '--gpu-memory') : 0,
    stateDir,
    python: get('python') ?? '/usr/bin/python3',
    cataloguePath: get('catalogue') !== undefined ? resolve(get('catalogue')!) : null,
    restoreBackend: oneOf(
      get('restoreBackend') ?? 'auto',
      ['auto', 'template', 'criu'],
      '--restore-backend',
    ),
    criu: get('criu') !== undefined ? resolve(get('criu')!) : null,
    standbyPerCheckpoint: get('standby') !== undefined ? count(get('standby')!, '--standby') : 1,
    standbyMax: get('standbyMax') !== undefined ? count(get('standbyMax')!, '--standby-max') : 8,
    imageCacheSize:
      get('imageCacheSize') !== undefined
        ? size(get('imageCacheSize')!, '--image-cache-size')
        : DEFAULT_IMAGE_CACHE_SIZE,
    packageIndex: get('packageIndex') ?? null,
    wheelDir: get('wheelDir') !== undefined ? resolve(get('wheelDir')!) : null,
    installer: oneOf(get('installer') ?? 'auto', ['auto', 'pip', 'uv'], '--installer'),
    cgroupParent: get('cgroupParent') ?? defaultCgroupParent(workerId, stateDirTag(stateDir)),
    sandbox: sandboxPolicy(get),
    security,
    auth: authOf(get, env),
    config,
  };
}

/** The default of --image-cache-size: 10 GiB. */
export const DEFAULT_IMAGE_CACHE_SIZE = 10 * 1024 * 1024 * 1024;

/** The first 8 hex digits of the SHA-256 of a state directory's absolute path. */
export function stateDirTag(stateDir: string): string {
  return createHash('sha256').update(stateDir).digest('hex').slice(0, 8);
}

function sandboxPolicy(get: (key: keyof WorkerFlagValues) => string | undefined): SandboxPolicy {
  try {
    const pidsLimit =
      get('pidsLimit') !== undefined
        ? count(get('pidsLimit')!, '--pids-limit')
        : DEFAULT_PIDS_LIMIT;
    if (pidsLimit < 1) throw new ConfigError('--pids-limit must be at least 1');
    return {
      network: oneOf(get('network') ?? 'none', NETWORK_MODES, '--network'),
      uids: parseUidRange(get('sandboxUids') ?? DEFAULT_UIDS),
      pidsLimit,
      tmpQuota: parseTmpQuota(get('tmpSize') ?? DEFAULT_TMP_QUOTA),
      hide: (get('hide') ?? '')
        .split(',')
        .map((dir) => dir.trim())
        .filter(Boolean)
        .map((dir) => resolve(dir)),
      hardened: true,
    };
  } catch (error) {
    if (error instanceof SandboxSettingError) throw new ConfigError(error.message);
    throw error;
  }
}

/** The address to report: `advertise`, or the bound address with the hostname for a wildcard. */
export function advertisedAddress(
  advertise: string | null,
  listen: string,
  boundPort: number,
  hostname: string,
): string {
  if (advertise) return advertise;
  const host = listen.slice(0, listen.lastIndexOf(':'));
  const wildcard = host === '0.0.0.0' || host === '[::]' || host === '::' || host === '';
  return `${wildcard ? hostname : host}:${boundPort}`;
}
