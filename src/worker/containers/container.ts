/** One container: a sandboxed executor with its cgroups, identity, files and state. */
import { formatSize } from '../../shared/units.js';
import type { ContainerLifecycle } from '../core/containers/index.js';
import type { ExecutorConnection } from '../executor-link/index.js';
import {
  describeExit,
  type ContainerCgroup,
  type ContainerExit,
  type ContainerPaths,
  type ContainerProcess,
  type EgressLink,
  type SandboxIdentity,
} from '../sandbox/index.js';

export type { ContainerLifecycle } from '../core/containers/index.js';

/** A container the worker holds. */
export class Container {
  /** Its state; `removed` once destruction started. */
  state: ContainerLifecycle = 'busy';
  /**
   * When its last call ended (ms since epoch, by the pool's clock); 0 before that (a container is
   * idle only once a call has ended in it).
   */
  lastUsedAt = 0;
  /** Destroys it once idle for EXECUTOR_TTL; set while it is `ready`, cleared when resumed. */
  idleTimer: NodeJS.Timeout | null = null;
  /** How its executor ended, once it has. */
  exit: ContainerExit | null = null;
  /** The request it runs now, if busy. */
  requestId = '';
  /** The GPU memory budget of its last call, in bytes (it holds it while it lives). */
  gpuMemory = 0;
  /**
   * The session it belongs to, set by the call that created it (or took it from the standby
   * shelf); only that session may resume it. Empty: no session, destroyed after its call.
   */
  sessionId = '';
  /** The connection its last call used, kept open for the next call of its session. */
  idleConnection: ExecutorConnection | null = null;
  /** Whether the router has heard of it (standby containers are not reported until taken). */
  reported = false;
  /** Its session was ended while a call ran in it: destroyed when that call ends, never kept. */
  sessionEnded = false;
  /** The image the container entered (its identity), or null: a session keeps its image. */
  imageId: string | null = null;

  constructor(
    /** Unique on this worker. */
    readonly id: string,
    /** The checkpoint it was actually restored from; empty for a cold start. */
    readonly checkpointId: string,
    readonly cgroup: ContainerCgroup,
    readonly paths: ContainerPaths,
    readonly process: ContainerProcess,
    /**
     * The uid and gid its processes run as: its own, or its image snapshot's (lent to every
     * container restored from it), or everyone's when the sandbox is unhardened.
     */
    readonly identity: SandboxIdentity,
    /** Gives the identity back once nothing of the container runs (called once, by the pool). */
    readonly giveBackIdentity: () => Promise<void>,
    /** Its slirp4netns, in the egress mode. */
    readonly egress: EgressLink | null = null,
  ) {
    const exited = new AbortController();
    this.exitSignal = exited.signal;
    void process.exited.then((exit) => {
      this.exit = exit;
      exited.abort(new Error('the container exited'));
    });
  }

  /** Aborted once the container's executor has exited. */
  readonly exitSignal: AbortSignal;

  /** Its current memory limit, in bytes (its cgroup's; set it with `cgroup.setLimit`). */
  get memoryLimit(): number {
    return this.cgroup.limit;
  }

  /** Whether its executor still runs. */
  get alive(): boolean {
    return this.exit === null;
  }

  /** Whether its executor has exited or does within `ms` (a broken connection precedes the exit). */
  async exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const exited = this.process.exited.then(() => true as const);
    return Promise.race([exited, waited]).finally(() => clearTimeout(timer));
  }

  /** Why its executor ended, in words for an operator; waits for the exit. */
  async exitCause(): Promise<string> {
    return (await this.exitReport()).cause;
  }

  /** Why its executor ended, and whether the kernel killed it for its memory limit; waits for the exit. */
  async exitReport(): Promise<{ readonly cause: string; readonly oomKilled: boolean }> {
    const exit = await this.process.exited;
    const oomKilled = (await this.cgroup.oomKills()) > 0;
    return {
      cause: describeExit(exit, { oomKilled, limitText: formatSize(this.memoryLimit) }),
      oomKilled,
    };
  }
}
