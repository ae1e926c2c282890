/**
 * The worker's flags and their environment names, and resolving them into WorkerOptions. One table
 * drives `readie worker --help`, the environment lookup and the docs. The environment and the
 * machine's facts are passed in; relative paths resolve against the working directory.
 */
import { resolve } from 'node:path';
import {
  ConfigError,
  parseSetting,
  resolveConfig,
  SETTINGS,
  type Config,
} from '../shared/config.js';
import { parseHostPort } from '../shared/host-port.js';
import { parseCount, parseSize, UnitParseError } from '../shared/units.js';
import type { WorkerAuth } from './credentials.js';

/** A worker flag: its commander spelling, environment name and help line. */
export interface WorkerFlag {
  readonly key: keyof WorkerFlagValues;
  readonly flag: string;
  readonly env: string;
  readonly help: string;
}

/** Raw flag values as commander hands them over (strings; booleans for switches). */
export interface WorkerFlagValues {
  router?: string;
  listen?: string;
  advertise?: string;
  id?: string;
  flavor?: string;
  memory?: string;
  residentMemory?: string;
  gpuMemory?: string;
  maxContainers?: string;
  stateDir?: string;
  python?: string;
  catalogue?: string;
  restoreBackend?: string;
  criu?: string;
  packageIndex?: string;
  wheelDir?: string;
  installer?: string;
  cgroupParent?: string;
  standby?: string;
  insecure?: boolean | string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  auth?: string;
  tokenFile?: string;
  routerTokenFile?: string;
}

/** Every worker flag, in `--help` order. */
export const WORKER_FLAGS: readonly WorkerFlag[] = [
  {
    key: 'router',
    flag: '--router <host:port>',
    env: 'WORKER_ROUTER',
    help: "the router's address (required)",
  },
  {
    key: 'listen',
    flag: '--listen <host:port>',
    env: 'WORKER_LISTEN',
    help: 'where to serve ExecutionService and health (required; port 0 picks one)',
  },
  {
    key: 'id',
    flag: '--id <id>',
    env: 'WORKER_ID',
    help: "this worker's ID, unique in the cluster (required)",
  },
  {
    key: 'flavor',
    flag: '--flavor <cpu|gpu>',
    env: 'WORKER_FLAVOR',
    help: 'hardware flavor (required)',
  },
  {
    key: 'advertise',
    flag: '--advertise <host:port>',
    env: 'WORKER_ADVERTISE',
    help: 'the address reported to the router (default: --listen, with the hostname for a wildcard host)',
  },
  {
    key: 'memory',
    flag: '--memory <size>',
    env: 'WORKER_MEMORY',
    help: "memory for containers, e.g. 16GiB (default: the machine's)",
  },
  {
    key: 'residentMemory',
    flag: '--resident-memory <size|none>',
    env: 'WORKER_RESIDENT_MEMORY',
    help: "resident budget for tenants' versions (catalogue residentMemory); a load past it evicts the least recently used unprotected version; none: no limit (default: half of --memory)",
  },
  {
    key: 'gpuMemory',
    flag: '--gpu-memory <size>',
    env: 'WORKER_GPU_MEMORY',
    help: 'GPU memory to report (default 0)',
  },
  {
    key: 'maxContainers',
    flag: '--max-containers <n>',
    env: 'WORKER_MAX_EXECUTORS',
    help: `most containers at once, 0 for no limit (default ${SETTINGS.WORKER_MAX_EXECUTORS.default})`,
  },
  {
    key: 'stateDir',
    flag: '--state-dir <dir>',
    env: 'WORKER_STATE_DIR',
    help: 'container files and sockets (default /var/lib/readie/<id>)',
  },
  {
    key: 'python',
    flag: '--python <path>',
    env: 'WORKER_PYTHON',
    help: 'the sandbox interpreter, with cloudpickle (default /usr/bin/python3)',
  },
  {
    key: 'catalogue',
    flag: '--catalogue <file>',
    env: 'WORKER_CATALOGUE',
    help: 'checkpoint catalogue JSON (format in docs/placement.md); none: cold starts only',
  },
  {
    key: 'standby',
    flag: '--standby <n>',
    env: 'WORKER_STANDBY',
    help: 'containers kept restored ahead of demand per checkpoint, 0 for none (default 1)',
  },
  {
    key: 'restoreBackend',
    flag: '--restore-backend <auto|template|criu>',
    env: 'WORKER_RESTORE_BACKEND',
    help: 'checkpoint restores: auto probes criu, then falls back to template; criu without a working criu is an ERROR status (default auto)',
  },
  {
    key: 'criu',
    flag: '--criu <path>',
    env: 'WORKER_CRIU',
    help: 'the criu binary, 4.1 or later (default: /usr/local/lib/readie/criu/sbin/criu, installed by deploy/install-criu.sh, else criu on PATH)',
  },
  {
    key: 'packageIndex',
    flag: '--package-index <url>',
    env: 'WORKER_PACKAGE_INDEX',
    help: "package index URL for installs (default: the installer's configuration)",
  },
  {
    key: 'wheelDir',
    flag: '--wheel-dir <dir>',
    env: 'WORKER_WHEEL_DIR',
    help: 'local wheel directory for installs; alone, installs are offline',
  },
  {
    key: 'installer',
    flag: '--installer <auto|pip|uv>',
    env: 'WORKER_INSTALLER',
    help: 'auto: uv if on PATH, else pip (default auto)',
  },
  {
    key: 'cgroupParent',
    flag: '--cgroup-parent <path>',
    env: 'WORKER_CGROUP_PARENT',
    help: 'parent memory cgroup, relative to the hierarchy root (default readie/<id>)',
  },
  {
    key: 'insecure',
    flag: '--insecure',
    env: 'READIE_INSECURE',
    help: 'plaintext gRPC to the router and for ExecutionService (TLS otherwise)',
  },
  {
    key: 'tlsCa',
    flag: '--tls-ca <file>',
    env: 'READIE_TLS_CA',
    help: "CA bundle to verify the router's certificate (default: system roots)",
  },
  {
    key: 'tlsCert',
    flag: '--tls-cert <file>',
    env: 'READIE_TLS_CERT',
    help: "this worker's certificate (serving, and as client certificate)",
  },
  {
    key: 'tlsKey',
    flag: '--tls-key <file>',
    env: 'READIE_TLS_KEY',
    help: "this worker's private key",
  },
  {
    key: 'auth',
    flag: '--auth <tokens|single-token|none>',
    env: 'WORKER_AUTH',
    help: 'tokens: --token-file and --router-token-file; single-token (READIE_AUTH_TOKEN both ways) and none are for development only (default tokens)',
  },
  {
    key: 'tokenFile',
    flag: '--token-file <file>',
    env: 'WORKER_TOKEN_FILE',
    help: "this worker's own token, presented on its reports to the router (first line; reloaded on SIGHUP)",
  },
  {
    key: 'routerTokenFile',
    flag: '--router-token-file <file>',
    env: 'WORKER_ROUTER_TOKEN_FILE',
    help: "the router's token or its sha256: digest, one a line: the only credential ExecutionService accepts (reloaded on SIGHUP)",
  },
];

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
  /** Containers kept restored ahead of demand, per held checkpoint. */
  readonly standbyPerCheckpoint: number;
  readonly packageIndex: string | null;
  readonly wheelDir: string | null;
  readonly installer: 'auto' | 'pip' | 'uv';
  readonly cgroupParent: string;
  readonly security: TransportSecurity;
  /** How the worker and the router authenticate to each other (docs/security.md). */
  readonly auth: WorkerAuth;
  /** The numeric settings (docs/router.md), WORKER_MAX_EXECUTORS included. */
  readonly config: Config;
  /** The unprivileged user and group that user code runs as (nobody:nogroup). */
  readonly sandboxUid: number;
  readonly sandboxGid: number;
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
    router: hostPort(required(get('router'), '--router', 'WORKER_ROUTER'), '--router'),
    listen: hostPort(required(get('listen'), '--listen', 'WORKER_LISTEN'), '--listen'),
    advertise: advertise === undefined ? null : hostPort(advertise, '--advertise'),
    flavor: oneOf(required(get('flavor'), '--flavor', 'WORKER_FLAVOR'), ['cpu', 'gpu'], '--flavor'),
    memoryTotal,
    residentMemory,
    gpuMemoryTotal: get('gpuMemory') !== undefined ? size(get('gpuMemory')!, '--gpu-memory') : 0,
    stateDir: resolve(get('stateDir') ?? `/var/lib/readie/${workerId}`),
    python: get('python') ?? '/usr/bin/python3',
    cataloguePath: get('catalogue') !== undefined ? resolve(get('catalogue')!) : null,
    restoreBackend: oneOf(
      get('restoreBackend') ?? 'auto',
      ['auto', 'template', 'criu'],
      '--restore-backend',
    ),
    criu: get('criu') !== undefined ? resolve(get('criu')!) : null,
    standbyPerCheckpoint: get('standby') !== undefined ? count(get('standby')!, '--standby') : 1,
    packageIndex: get('packageIndex') ?? null,
    wheelDir: get('wheelDir') !== undefined ? resolve(get('wheelDir')!) : null,
    installer: oneOf(get('installer') ?? 'auto', ['auto', 'pip', 'uv'], '--installer'),
    cgroupParent: get('cgroupParent') ?? `readie/${workerId}`,
    security,
    auth: authOf(get, env),
    config,
    sandboxUid: 65534,
    sandboxGid: 65534,
  };
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
