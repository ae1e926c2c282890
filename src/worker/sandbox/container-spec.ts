/** What a container's sandbox looks like: paths, identity and environment. Pure. */
import { join } from 'node:path';

/** The unix socket path limit (sun_path is 108 bytes with its terminating NUL). */
export const MAX_SOCKET_PATH = 107;

/** Where a container's files live on the host, under the worker's state directory. */
export interface ContainerPaths {
  /** The container's directory (removed with it). */
  readonly dir: string;
  /** Bound as the container's private /tmp. */
  readonly tmpDir: string;
  /** `/tmp/.readie` as the host sees it. */
  readonly readieDir: string;
  /** The executor's unix socket. */
  readonly socket: string;
}

/** Inside the container: readie's own directory on its private /tmp. */
export const SANDBOX_READIE_DIR = '/tmp/.readie';

/** Inside the container: the prefix packages are installed into. */
export const PACKAGE_PREFIX = `${SANDBOX_READIE_DIR}/packages`;

/** Inside the container: where the worker's wheel directory is bound, read-only. */
export const SANDBOX_WHEEL_DIR = `${SANDBOX_READIE_DIR}/wheels`;

/** A container path layout under `stateDir`. */
export function containerPaths(stateDir: string, containerId: string): ContainerPaths {
  const dir = join(stateDir, 'containers', containerId);
  const tmpDir = join(dir, 'tmp');
  return { dir, tmpDir, readieDir: join(tmpDir, '.readie'), socket: join(dir, 'executor.sock') };
}

/** Why a state directory cannot hold container sockets; null when it can. */
export function socketPathProblem(stateDir: string, sampleContainerId: string): string | null {
  const { socket } = containerPaths(stateDir, sampleContainerId);
  const length = Buffer.byteLength(socket);
  if (length <= MAX_SOCKET_PATH) return null;
  return `container sockets under ${stateDir} would be ${length} bytes long, over the ${MAX_SOCKET_PATH}-byte unix socket limit: use a shorter --state-dir`;
}

/** Everything the sandbox needs, as the executor's zygote reads it (see zygote.py). */
export interface ContainerSpec {
  readonly container: string;
  readonly hostname: string;
  readonly socket: string;
  readonly tmpDir: string;
  readonly cgroupProcs: string;
  readonly hide: readonly string[];
  /** Host directories bound read-only at `target` (a host path inside tmpDir). */
  readonly binds: readonly { readonly source: string; readonly target: string }[];
  readonly uid: number;
  readonly gid: number;
  readonly shmSize: number;
  readonly env: Readonly<Record<string, string>>;
  readonly workerPid: number;
}

/** The inputs of a container spec. */
export interface ContainerSpecInput {
  readonly containerId: string;
  readonly workerId: string;
  readonly stateDir: string;
  readonly cgroupProcs: string;
  readonly uid: number;
  readonly gid: number;
  readonly workerPid: number;
  /** /dev/shm's size; defaults to 64 MiB. */
  readonly shmSize?: number;
  /** The worker's wheel directory, bound read-only at SANDBOX_WHEEL_DIR. */
  readonly wheelDir?: string | null;
}

/**
 * The spec of one container: its private /tmp and socket under the state directory, which the
 * sandbox masks (so no container sees another's files), and a clean environment (no worker
 * secrets reach user code).
 */
export function containerSpec(input: ContainerSpecInput): ContainerSpec {
  const paths = containerPaths(input.stateDir, input.containerId);
  return {
    container: input.containerId,
    hostname: input.containerId,
    socket: paths.socket,
    tmpDir: paths.tmpDir,
    cgroupProcs: input.cgroupProcs,
    hide: [input.stateDir],
    binds: input.wheelDir
      ? [{ source: input.wheelDir, target: join(paths.readieDir, 'wheels') }]
      : [],
    uid: input.uid,
    gid: input.gid,
    shmSize: input.shmSize ?? 64 * 1024 * 1024,
    env: {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: '/tmp',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      PYTHONDONTWRITEBYTECODE: '1',
      READIE_CONTAINER_ID: input.containerId,
      READIE_WORKER_ID: input.workerId,
    },
    workerPid: input.workerPid,
  };
}
