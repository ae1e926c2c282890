/**
 * Making a container: its files, its identity, its cgroups, its spec, its first process (restored
 * from a checkpoint or started cold) and, in the egress mode, its network stack.
 */
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { ImageSeed, ImageSnapshot, RestoreBackend } from '../checkpoints/restore-backend.js';
import {
  attachEgress,
  coldStart,
  containerPaths,
  containerSpec,
  EGRESS_NAMESERVER,
  EgressError,
  tmpSize,
  type ContainerCgroup,
  type ContainerCgroups,
  type ContainerPaths,
  type ContainerProcess,
  type ContainerSpec,
  type EgressLink,
  LentIdentity,
  type IdentitySource,
  type ImageLayer,
  type NetworkMode,
  type SandboxIdentity,
  type SandboxPolicy,
} from '../sandbox/index.js';
import { Container } from './container.js';
import { newContainerId } from './container-ids.js';

/** How long a container may take to make its network namespace, then slirp4netns to attach. */
const EGRESS_TIMEOUT_MS = 10_000;

/** The sandbox settings and the means to apply them. */
export interface SandboxContext {
  readonly policy: SandboxPolicy;
  readonly identities: IdentitySource;
  /** The slirp4netns binary; null unless the egress mode is on. */
  readonly slirp4netns: string | null;
}

/** What making containers needs. */
export interface ContainerFactoryOptions {
  readonly workerId: string;
  readonly stateDir: string;
  readonly python: string;
  /** The wheel directory to bind into every container, if installs use one. */
  readonly wheelDir: string | null;
  readonly cgroups: ContainerCgroups;
  readonly backend: RestoreBackend;
  readonly sandbox: SandboxContext;
  readonly log: Logger;
}

/** An image's snapshot with the uid it lends its containers. */
export interface HeldSnapshot {
  readonly snapshot: ImageSnapshot;
  readonly identity: LentIdentity;
}

/** A container to restore from an image's snapshot instead of a checkpoint. */
export interface SnapshotStart extends HeldSnapshot {
  /** The image's identity: the container has entered it already. */
  readonly imageId: string;
}

/** Makes containers. */
export class ContainerFactory {
  constructor(private readonly options: ContainerFactoryOptions) {}

  /**
   * Makes a container with `memory` as its limit (and its /tmp quota's base): restored from
   * `checkpointId` when it is not empty (throwing the restore's error if that fails), else cold.
   * Falling back to a cold start is the pool's decision (ContainerPool.create). `layer`: the
   * call's image, bound into it (writable in its build, whose prefix then belongs to the
   * container's uid). `start`: restore it from that image snapshot instead (it then runs as the
   * snapshot's uid and has entered the image).
   */
  async make(
    memory: number,
    checkpointId: string,
    layer: ImageLayer | null = null,
    start: SnapshotStart | null = null,
  ): Promise<Container> {
    const { options } = this;
    const { policy, identities } = options.sandbox;
    const egress = policy.hardened && policy.network === 'egress';
    const id = newContainerId();
    const paths = containerPaths(options.stateDir, id);
    const snapshots = options.backend.imageSnapshots;
    let identity: SandboxIdentity | null = null;
    let giveBack: (() => Promise<void>) | null = null;
    let cgroup: ContainerCgroup | null = null;
    let link: EgressLink | null = null;
    try {
      await this.makeFiles(paths, egress);
      if (start && !snapshots) throw new Error('this worker makes no image snapshots');
      if (start) {
        identity = start.identity.identity;
        giveBack = start.identity.lend();
      } else {
        const claimed = await identities.claim(id);
        identity = claimed;
        giveBack = () => identities.release(claimed);
      }
      if (layer?.writable) await chown(layer.prefix, identity.uid, identity.gid);
      cgroup = await options.cgroups.create(id, {
        memory,
        pids: policy.hardened ? policy.pidsLimit : null,
      });
      const spec = this.spec(id, cgroup, identity, memory, policy.network, policy.hardened, layer);
      const started: ContainerProcess =
        start && snapshots
          ? await snapshots.restore(start.snapshot, spec)
          : checkpointId !== ''
            ? await options.backend.restore(checkpointId, spec)
            : await coldStart({ python: options.python, log: options.log }, spec);
      if (egress) link = await this.attachNetwork(started, cgroup);
      const container = new Container(
        id,
        checkpointId,
        cgroup,
        paths,
        started,
        identity,
        giveBack,
        link,
      );
      if (start) container.imageId = start.imageId;
      return container;
    } catch (error) {
      link?.stop();
      // A uid goes back only once nothing of the container can still run as it.
      if ((await this.unmake(cgroup, paths)) && giveBack) await giveBack().catch(() => undefined);
      throw error;
    }
  }

  /** Whether this worker makes image snapshots (a backend that does, a hardened sandbox). */
  get makesImageSnapshots(): boolean {
    return this.options.backend.imageSnapshots !== null && this.options.sandbox.policy.hardened;
  }

  /**
   * Dumps a snapshot of `seed` into the new directory `dir`: a seed container (its own uid, which
   * the snapshot then keeps, a cgroup of `memory`, the image's `prefix` bound read-only) enters
   * the image and is dumped. Null where the backend makes no snapshots or the sandbox is
   * unhardened; throws why a dump failed.
   */
  async dumpImageSnapshot(
    dir: string,
    prefix: string,
    seed: ImageSeed,
    memory: number,
  ): Promise<HeldSnapshot | null> {
    const { options } = this;
    const { policy, identities } = options.sandbox;
    const snapshots = options.backend.imageSnapshots;
    if (!snapshots || !policy.hardened) return null;
    const id = newContainerId();
    const paths = containerPaths(options.stateDir, id);
    const identity = await identities.claim(`${seed.name} snapshot`);
    let cgroup: ContainerCgroup | null = null;
    let kept = false;
    try {
      await this.makeFiles(paths, false);
      cgroup = await options.cgroups.create(id, { memory, pids: policy.pidsLimit });
      // The seed needs no route out: its restored containers get theirs.
      const layer = { prefix, wheels: null, writable: false };
      const spec = this.spec(id, cgroup, identity, memory, 'none', true, layer);
      const snapshot = await snapshots.dump(dir, spec, seed);
      kept = true;
      return { snapshot, identity: new LentIdentity(identity, (held) => identities.release(held)) };
    } finally {
      const removed = await this.unmake(cgroup, paths);
      if (!kept && removed) await identities.release(identity).catch(() => undefined);
    }
  }

  /**
   * Reopens a snapshot an earlier run dumped into `dir` and claims its uid again: the snapshot,
   * or why it cannot serve (stale, or its uid is another container's now).
   */
  async reopenImageSnapshot(
    dir: string,
    seed: ImageSeed,
  ): Promise<HeldSnapshot | { readonly stale: string }> {
    const { identities, policy } = this.options.sandbox;
    const snapshots = this.options.backend.imageSnapshots;
    if (!snapshots || !policy.hardened) return { stale: 'this worker makes no image snapshots' };
    const opened = await snapshots.open(dir, seed).catch((error: Error) => ({
      stale: error.message,
    }));
    if ('stale' in opened) return opened;
    if (!(await identities.claimExact(opened.uid, `${seed.name} snapshot`))) {
      return { stale: `its uid ${opened.uid} is another container's now` };
    }
    const identity = { uid: opened.uid, gid: opened.uid };
    return {
      snapshot: opened,
      identity: new LentIdentity(identity, (held) => identities.release(held)),
    };
  }

  /** The container's directory, its downloads directory and, in the egress mode, its resolv.conf. */
  private async makeFiles(paths: ContainerPaths, egress: boolean): Promise<void> {
    await mkdir(paths.dir, { recursive: true, mode: 0o700 });
    // Root's, readable by the container through its read-only bind; the worker fills it.
    await mkdir(paths.downloads, { mode: 0o755 });
    await chmod(paths.downloads, 0o755);
    if (egress) {
      await writeFile(paths.resolvConf, `nameserver ${EGRESS_NAMESERVER}\n`, { mode: 0o644 });
      await chmod(paths.resolvConf, 0o644);
    }
  }

  /** A container's spec, from the worker's settings and what was made for it. */
  private spec(
    id: string,
    cgroup: ContainerCgroup,
    identity: SandboxIdentity,
    memory: number,
    network: NetworkMode,
    hardened: boolean,
    layer: ImageLayer | null,
  ): ContainerSpec {
    const { options } = this;
    const { policy } = options.sandbox;
    return containerSpec({
      containerId: id,
      workerId: options.workerId,
      stateDir: options.stateDir,
      cgroupProcs: cgroup.procsFiles,
      uid: identity.uid,
      gid: identity.gid,
      workerPid: process.pid,
      network,
      hardened,
      tmpSize: tmpSize(policy.tmpQuota, memory),
      hide: policy.hide,
      wheelDir: options.wheelDir,
      layer,
    });
  }

  /**
   * Kills what runs in a container that is not kept, removes its cgroup and files; whether the
   * cgroup is gone (only then may its uid go back).
   */
  private async unmake(cgroup: ContainerCgroup | null, paths: ContainerPaths): Promise<boolean> {
    let removed = cgroup === null;
    if (cgroup) {
      await cgroup.killAll().catch(() => undefined);
      removed = await cgroup.remove().then(
        () => true,
        () => false,
      );
    }
    await rm(paths.dir, { recursive: true, force: true }).catch(() => undefined);
    return removed;
  }

  /** Waits for the container's own network namespace, then attaches slirp4netns to it. */
  private async attachNetwork(
    started: ContainerProcess,
    cgroup: ContainerCgroup,
  ): Promise<EgressLink> {
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      started.network.then(() => 'ready' as const),
      started.exited.then(() => 'exited' as const),
      new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), EGRESS_TIMEOUT_MS);
      }),
    ]).finally(() => clearTimeout(timer));
    if (outcome === 'exited') {
      throw new EgressError('the container exited before it had its own network namespace');
    }
    if (outcome === 'late') {
      throw new EgressError(
        `the container did not make its network namespace within ${EGRESS_TIMEOUT_MS} ms`,
      );
    }
    return attachEgress(started.pid, cgroup, {
      slirp4netns: this.options.sandbox.slirp4netns ?? 'slirp4netns',
      timeoutMs: EGRESS_TIMEOUT_MS,
      log: this.options.log,
    });
  }
}
