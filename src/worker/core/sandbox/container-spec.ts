/** What a container's sandbox looks like: paths, identity, limits and environment. Pure. */
import { join } from 'node:path';
import type { NetworkMode } from './sandbox-policy.js';

/** The unix socket path limit (sun_path is 108 bytes with its terminating NUL). */
export const MAX_SOCKET_PATH = 107;

/** Where a container's files live on the host, under the worker's state directory. */
export interface ContainerPaths {
  /** The container's directory (removed with it; root's, never writable by the container). */
  readonly dir: string;
  /**
   * `<dir>/tmp`: not used by the sandbox, whose /tmp is a tmpfs; the CRIU restore helper puts
   * its log beside it.
   */
  readonly tmpDir: string;
  /** Packages the worker fetched for the container, bound read-only at SANDBOX_DOWNLOADS_DIR. */
  readonly downloads: string;
  /** The egress mode's resolv.conf, bound read-only over /etc/resolv.conf. */
  readonly resolvConf: string;
  /** The executor's unix socket. */
  readonly socket: string;
}

/** Inside the container: readie's own directory on its private /tmp. */
export const SANDBOX_READIE_DIR = '/tmp/.readie';

/** Inside the container: the prefix packages are installed into. */
export const PACKAGE_PREFIX = `${SANDBOX_READIE_DIR}/packages`;

/** Inside the container: where the worker's wheel directory is bound, read-only. */
export const SANDBOX_WHEEL_DIR = `${SANDBOX_READIE_DIR}/wheels`;

/** Inside the container: where the packages the worker fetched for it appear, read-only. */
export const SANDBOX_DOWNLOADS_DIR = `${SANDBOX_READIE_DIR}/downloads`;

/** Inside the container: an image's installed prefix (docs/images.md), read-only but in its build. */
export const SANDBOX_IMAGE_PREFIX = `${SANDBOX_READIE_DIR}/image`;

/** Inside the container: the wheels an image's build installs from, read-only. */
export const SANDBOX_IMAGE_WHEELS = `${SANDBOX_READIE_DIR}/image-wheels`;

/** slirp4netns's DNS forwarder, as the container sees it in the egress mode. */
export const EGRESS_NAMESERVER = '10.0.2.3';

/** A container path layout under `stateDir`. */
export function containerPaths(stateDir: string, containerId: string): ContainerPaths {
  const dir = join(stateDir, 'containers', containerId);
  return {
    dir,
    tmpDir: join(dir, 'tmp'),
    downloads: join(dir, 'downloads'),
    resolvConf: join(dir, 'resolv.conf'),
    socket: join(dir, 'executor.sock'),
  };
}

/** Why a state directory cannot hold container sockets; null when it can. */
export function socketPathProblem(stateDir: string, sampleContainerId: string): string | null {
  const { socket } = containerPaths(stateDir, sampleContainerId);
  const length = Buffer.byteLength(socket);
  if (length <= MAX_SOCKET_PATH) return null;
  return `container sockets under ${stateDir} would be ${length} bytes long, over the ${MAX_SOCKET_PATH}-byte unix socket limit: use a shorter --state-dir`;
}

/** A host path bound at a path inside the container: read-only unless `writable`. */
export interface SandboxBind {
  readonly source: string;
  readonly target: string;
  /** Only an image's build writes through a bind, into the prefix the worker made for it. */
  readonly writable?: boolean;
}

/** An image's files in a container: its prefix, and in its build the wheels it installs. */
export interface ImageLayer {
  /** The host directory bound at SANDBOX_IMAGE_PREFIX. */
  readonly prefix: string;
  /** The build's wheels, bound read-only at SANDBOX_IMAGE_WHEELS; null once built. */
  readonly wheels: string | null;
  /** True in the build alone (the container's own uid owns the prefix then). */
  readonly writable: boolean;
}

/** Everything the sandbox needs, as the executor's zygote reads it (see zygote.py). */
export interface ContainerSpec {
  readonly container: string;
  readonly hostname: string;
  readonly socket: string;
  readonly tmpDir: string;
  /** The cgroup.procs files the container joins: memory, and pids on cgroup v1. */
  readonly cgroupProcs: readonly string[];
  readonly network: NetworkMode;
  /** False only for the benchmark's unhardened baseline. */
  readonly hardened: boolean;
  /** The size of the /tmp tmpfs, in bytes. */
  readonly tmpSize: number;
  readonly readieDir: string;
  readonly hide: readonly string[];
  readonly binds: readonly SandboxBind[];
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
  readonly cgroupProcs: readonly string[];
  readonly uid: number;
  readonly gid: number;
  readonly workerPid: number;
  readonly network: NetworkMode;
  readonly hardened: boolean;
  readonly tmpSize: number;
  /** Host directories to mask besides `stateDir`. */
  readonly hide?: readonly string[];
  /** /dev/shm's size; defaults to 64 MiB. */
  readonly shmSize?: number;
  /** The worker's wheel directory, bound read-only at SANDBOX_WHEEL_DIR. */
  readonly wheelDir?: string | null;
  /** The call's image, if any. */
  readonly layer?: ImageLayer | null;
}

/**
 * The spec of one container: its socket under the state directory, which the sandbox masks
 * with every other state directory the worker knows of (so no container sees another's files),
 * read-only binds of what installs read, and a clean environment (no worker secrets reach user
 * code).
 */
export function containerSpec(input: ContainerSpecInput): ContainerSpec {
  const paths = containerPaths(input.stateDir, input.containerId);
  const binds: SandboxBind[] = [{ source: paths.downloads, target: SANDBOX_DOWNLOADS_DIR }];
  if (input.wheelDir) binds.push({ source: input.wheelDir, target: SANDBOX_WHEEL_DIR });
  if (input.layer) {
    binds.push({
      source: input.layer.prefix,
      target: SANDBOX_IMAGE_PREFIX,
      ...(input.layer.writable ? { writable: true } : {}),
    });
    if (input.layer.wheels)
      binds.push({ source: input.layer.wheels, target: SANDBOX_IMAGE_WHEELS });
  }
  if (input.hardened && input.network === 'egress') {
    binds.push({ source: paths.resolvConf, target: '/etc/resolv.conf' });
  }
  return {
    container: input.containerId,
    hostname: input.containerId,
    socket: paths.socket,
    tmpDir: paths.tmpDir,
    cgroupProcs: input.cgroupProcs,
    network: input.network,
    hardened: input.hardened,
    tmpSize: input.tmpSize,
    readieDir: SANDBOX_READIE_DIR,
    hide: [...new Set([input.stateDir, ...(input.hide ?? [])])],
    binds,
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
