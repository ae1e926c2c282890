/**
 * The worker's flags: commander spelling, environment name and help line. One table drives
 * `readie worker --help`, the environment lookup (options.ts) and the docs.
 */
import { SETTINGS } from '../shared/config.js';
import {
  DEFAULT_PIDS_LIMIT,
  DEFAULT_TMP_QUOTA,
  DEFAULT_UIDS,
  NETWORK_MODES,
} from './core/sandbox/sandbox-policy.js';

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
  network?: string;
  sandboxUids?: string;
  pidsLimit?: string;
  tmpSize?: string;
  hide?: string;
  standby?: string;
  standbyMax?: string;
  imageCacheSize?: string;
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
    flag: '--router <host:port[,host:port...]>',
    env: 'WORKER_ROUTER',
    help: "the router's address, or every router's (leader and standbys): reports go to the leader (required)",
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
    help: 'checkpoint catalogue JSON (format in docs/catalogue.md); none: cold starts only',
  },
  {
    key: 'standby',
    flag: '--standby <n>',
    env: 'WORKER_STANDBY',
    help: 'containers kept restored ahead of demand per checkpoint, at least; 0 for none (default 1)',
  },
  {
    key: 'standbyMax',
    flag: '--standby-max <n>',
    env: 'WORKER_STANDBY_MAX',
    help: 'the most standbys per checkpoint kept for recent demand: as many as calls started new containers of it within any second of the last EXECUTOR_TTL (default 8)',
  },
  {
    key: 'imageCacheSize',
    flag: '--image-cache-size <size>',
    env: 'WORKER_IMAGE_CACHE_SIZE',
    help: "disk for tenants' images (docs/images.md): a build past it evicts the least recently used idle images; an image larger than it is refused; 0: no bound (default 10GiB)",
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
    help: "package index URL; the worker fetches wheels from it on the host side, containers install them offline (default: pip's configuration on the worker host)",
  },
  {
    key: 'wheelDir',
    flag: '--wheel-dir <dir>',
    env: 'WORKER_WHEEL_DIR',
    help: 'local wheel directory, bound read-only into containers; alone, nothing is fetched',
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
    help: 'parent cgroup (memory and pids), relative to the hierarchy root (default readie/<id>-<8 hex digits of the state dir>)',
  },
  {
    key: 'network',
    flag: `--network <${NETWORK_MODES.join('|')}>`,
    env: 'WORKER_NETWORK',
    help: "containers' network: none (their own loopback only) or egress (out through slirp4netns, never to the host's loopback) (default none)",
  },
  {
    key: 'sandboxUids',
    flag: '--sandbox-uids <first-last>',
    env: 'WORKER_SANDBOX_UIDS',
    help: `host uids (and gids) for containers, one each, claimed host-wide (default ${DEFAULT_UIDS})`,
  },
  {
    key: 'pidsLimit',
    flag: '--pids-limit <n>',
    env: 'WORKER_PIDS_LIMIT',
    help: `most processes and threads per container (default ${DEFAULT_PIDS_LIMIT})`,
  },
  {
    key: 'tmpSize',
    flag: '--tmp-size <N%|size>',
    env: 'WORKER_TMP_SIZE',
    help: `each container's /tmp (a tmpfs, counted in its memory): a share of its first call's budget, or a size (default ${DEFAULT_TMP_QUOTA})`,
  },
  {
    key: 'hide',
    flag: '--hide <dirs>',
    env: 'WORKER_HIDE',
    help: 'more host directories to mask in every container, comma-separated (the state dir always is)',
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
