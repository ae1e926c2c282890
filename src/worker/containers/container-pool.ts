/**
 * The containers a worker holds: creating them (restored from a checkpoint, or cold), resuming a
 * session's container, releasing and destroying them, reaping idle ones, and keeping standby
 * containers restored ahead of demand. Every state change the router should know is reported
 * through `report`.
 */
import { chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ContainerState } from '../../proto/gen/readie/v1/registry.js';
import type { RestoreBackend } from '../checkpoints/restore-backend.js';
import { ExecutorConnection } from '../executor-link/index.js';
import {
  ContainerBusyError,
  ContainerNotFoundError,
  ContainerUnavailableError,
  ShuttingDownError,
} from '../errors.js';
import {
  coldStart,
  containerPaths,
  containerSpec,
  type ContainerCgroup,
  type ContainerProcess,
  type MemoryCgroups,
} from '../sandbox/index.js';
import { Container } from './container.js';
import { newContainerId } from './container-ids.js';

/** A container state change, as the router hears it. */
export interface ContainerReport {
  readonly containerId: string;
  readonly state: ContainerState;
  readonly checkpointId: string;
}

/** What the pool needs. */
export interface ContainerPoolOptions {
  readonly workerId: string;
  readonly stateDir: string;
  /** The most containers at once; 0 for no limit (WORKER_MAX_EXECUTORS). Standbys do not count. */
  readonly maxContainers: number;
  /** The unprivileged user and group user code runs as. */
  readonly uid: number;
  readonly gid: number;
  readonly python: string;
  /** The wheel directory to bind into every container, if installs use one. */
  readonly wheelDir: string | null;
  readonly cgroups: MemoryCgroups;
  readonly backend: RestoreBackend;
  /** Idle session containers are destroyed after this long (EXECUTOR_TTL). */
  readonly idleTtlMs: number;
  /** Containers kept restored ahead of demand, per held checkpoint (0: restore on demand). */
  readonly standbyPerCheckpoint: number;
  /** The memory limit of a standby container until a call takes it (DEFAULT_MEMORY). */
  readonly standbyMemory: number;
  /** How long a standby's executor may take to answer its first dial (DIAL_TOTAL_TIMEOUT). */
  readonly dialTimeoutMs: number;
  readonly report: (report: ContainerReport) => void;
  readonly log: Logger;
}

/** A freshly created container, and why its checkpoint was not used if it was asked for. */
export interface CreatedContainer {
  readonly container: Container;
  /** Set when a checkpoint was asked for but the container started cold: why. */
  readonly fallback: string | null;
}

const DESTROY_WAIT_MS = 5_000;

/** The worker's containers. */
export class ContainerPool {
  private readonly containers = new Map<string, Container>();
  private readonly standbys = new Map<string, Container[]>();
  private readonly preparing = new Map<string, number>();
  private readonly destructions = new Map<string, Promise<void>>();
  private readonly preparations = new Set<Promise<void>>();
  private starting = 0;
  private closing = false;
  private reaper: NodeJS.Timeout | null = null;

  constructor(private readonly options: ContainerPoolOptions) {}

  /** Containers held or being started for calls (standbys excluded). */
  get count(): number {
    return this.containers.size + this.starting;
  }

  /** The containers held for calls, in no particular order. */
  list(): Container[] {
    return [...this.containers.values()];
  }

  /** The standby containers, per checkpoint. */
  standbyCount(checkpointId: string): number {
    return this.standbys.get(checkpointId)?.length ?? 0;
  }

  /** Creates a container with `memory` as its limit, from `checkpointId` if that restores. */
  async create(memory: number, checkpointId: string): Promise<CreatedContainer> {
    if (this.closing) throw new ShuttingDownError('the worker is shutting down');
    const { maxContainers } = this.options;
    if (maxContainers > 0 && this.count >= maxContainers) {
      throw new ContainerUnavailableError(
        `this worker already holds ${this.count} containers, its limit (WORKER_MAX_EXECUTORS=${maxContainers})`,
      );
    }
    this.starting += 1;
    try {
      const standby = checkpointId === '' ? null : await this.takeStandby(checkpointId, memory);
      if (standby) {
        this.adopt(standby);
        return { container: standby, fallback: null };
      }
      const created = await this.spawn(memory, checkpointId, true);
      this.adopt(created.container);
      if (created.container.checkpointId !== '') this.replenish(created.container.checkpointId);
      return created;
    } catch (error) {
      if (error instanceof ShuttingDownError) throw error;
      throw new ContainerUnavailableError(
        `could not create a container: ${(error as Error).message}`,
      );
    } finally {
      this.starting -= 1;
    }
  }

  private adopt(container: Container): void {
    container.state = 'busy';
    this.containers.set(container.id, container);
    this.reportState(container, ContainerState.CONTAINER_STATE_BUSY);
  }

  /** Starts a container's process: restored, or cold when `fallBack` allows and restore fails. */
  private async spawn(
    memory: number,
    checkpointId: string,
    fallBack: boolean,
  ): Promise<CreatedContainer> {
    const id = newContainerId();
    const paths = containerPaths(this.options.stateDir, id);
    let cgroup: ContainerCgroup | null = null;
    try {
      await mkdir(paths.readieDir, { recursive: true, mode: 0o700 });
      await chown(paths.tmpDir, this.options.uid, this.options.gid);
      await chown(paths.readieDir, this.options.uid, this.options.gid);
      if (this.options.wheelDir) await mkdir(join(paths.readieDir, 'wheels'));
      cgroup = await this.options.cgroups.create(id, memory);
      const spec = containerSpec({
        containerId: id,
        workerId: this.options.workerId,
        stateDir: this.options.stateDir,
        cgroupProcs: cgroup.procsFile,
        uid: this.options.uid,
        gid: this.options.gid,
        workerPid: process.pid,
        wheelDir: this.options.wheelDir,
      });
      let started: ContainerProcess | null = null;
      let used = '';
      let fallback: string | null = null;
      if (checkpointId !== '') {
        try {
          started = await this.options.backend.restore(checkpointId, spec);
          used = checkpointId;
        } catch (error) {
          if (!fallBack) throw error;
          fallback = (error as Error).message;
        }
      }
      started ??= await coldStart({ python: this.options.python, log: this.options.log }, spec);
      const container = new Container(id, used, cgroup, paths, started, memory);
      void started.exited.then(() => this.onExit(container));
      return { container, fallback };
    } catch (error) {
      await cgroup?.killAll().catch(() => undefined);
      await cgroup?.remove().catch(() => undefined);
      await rm(paths.dir, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
  }

  /** A live standby of `checkpointId` set to the call's budget, or null if there is none. */
  private async takeStandby(checkpointId: string, memory: number): Promise<Container | null> {
    const waiting = this.standbys.get(checkpointId) ?? [];
    for (;;) {
      const standby = waiting.shift();
      if (!standby) return null;
      if (!standby.alive || standby.state !== 'standby') continue;
      try {
        await standby.cgroup.setLimit(memory);
        standby.memoryLimit = memory;
      } catch {
        void this.destroy(standby);
        continue;
      }
      this.replenish(checkpointId);
      return standby;
    }
  }

  /** Restores standby containers of `checkpointId` in the background, up to the configured count. */
  replenish(checkpointId: string): void {
    const wanted = this.options.standbyPerCheckpoint;
    if (wanted <= 0 || this.closing) return;
    if (!this.options.backend.held().includes(checkpointId)) return;
    const have = this.standbyCount(checkpointId) + (this.preparing.get(checkpointId) ?? 0);
    for (let i = have; i < wanted; i += 1) {
      this.preparing.set(checkpointId, (this.preparing.get(checkpointId) ?? 0) + 1);
      const preparation = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => this.prepareStandby(checkpointId))
        .finally(() => this.preparations.delete(preparation));
      this.preparations.add(preparation);
    }
  }

  private async prepareStandby(checkpointId: string): Promise<void> {
    try {
      const { container } = await this.spawn(this.options.standbyMemory, checkpointId, false);
      container.state = 'standby';
      try {
        // A standby is ready only once its executor answers: the call that takes it starts on
        // this open connection.
        container.idleConnection = await ExecutorConnection.dial(container.paths.socket, {
          timeoutMs: this.options.dialTimeoutMs,
          signal: AbortSignal.any([container.exitSignal]),
        });
      } catch (error) {
        void this.destroy(container);
        throw error;
      }
      if (this.closing || !this.options.backend.held().includes(checkpointId)) {
        void this.destroy(container);
        return;
      }
      const list = this.standbys.get(checkpointId) ?? [];
      list.push(container);
      this.standbys.set(checkpointId, list);
    } catch (error) {
      this.options.log.warn(
        { checkpointId, err: (error as Error).message },
        'could not restore a standby container; calls restore on demand',
      );
    } finally {
      this.preparing.set(checkpointId, (this.preparing.get(checkpointId) ?? 1) - 1);
    }
  }

  /** Drops standbys of checkpoints no longer held, and restores them for those that are. */
  refreshStandbys(): void {
    const held = new Set(this.options.backend.held());
    for (const [checkpointId, list] of this.standbys) {
      if (held.has(checkpointId)) continue;
      this.standbys.delete(checkpointId);
      for (const standby of list) void this.destroy(standby);
    }
    for (const checkpointId of held) this.replenish(checkpointId);
  }

  /** Takes a session's idle container for a call, re-applying the call's memory limit. */
  async resume(containerId: string, memory: number, requestId: string): Promise<Container> {
    if (this.closing) throw new ShuttingDownError('the worker is shutting down');
    const container = this.containers.get(containerId);
    if (!container || container.state === 'removed' || !container.alive) {
      throw new ContainerNotFoundError(
        `container ${containerId} is not on this worker (it was destroyed or never created here)`,
      );
    }
    if (container.state === 'busy') {
      throw new ContainerBusyError(
        `container ${containerId} is busy with request ${container.requestId}`,
      );
    }
    container.state = 'busy';
    container.requestId = requestId;
    try {
      await container.cgroup.setLimit(memory);
      container.memoryLimit = memory;
    } catch (error) {
      container.state = 'ready';
      container.requestId = '';
      throw new ContainerUnavailableError(
        `cannot resume container ${containerId}: ${(error as Error).message}`,
      );
    }
    this.reportState(container, ContainerState.CONTAINER_STATE_BUSY);
    return container;
  }

  /** After a call: keep the container for its session (ready) or destroy it, in the background. */
  release(container: Container, keep: boolean): void {
    if (keep && container.alive && container.state === 'busy' && !this.closing) {
      container.state = 'ready';
      container.requestId = '';
      container.lastUsedAt = Date.now();
      this.reportState(container, ContainerState.CONTAINER_STATE_READY);
      return;
    }
    void this.destroy(container);
  }

  /** Kills a container, removes its cgroup and files, and reports it removed. */
  destroy(container: Container): Promise<void> {
    const pending = this.destructions.get(container.id);
    if (pending) return pending;
    if (container.state === 'removed') return Promise.resolve();
    const destruction = this.tearDown(container).finally(() =>
      this.destructions.delete(container.id),
    );
    this.destructions.set(container.id, destruction);
    return destruction;
  }

  private async tearDown(container: Container): Promise<void> {
    const diedOnItsOwn = !container.alive;
    container.state = 'removed';
    container.idleConnection?.destroy();
    container.idleConnection = null;
    if (diedOnItsOwn) this.reportState(container, ContainerState.CONTAINER_STATE_ERROR);
    const log = this.options.log.child({ containerId: container.id });
    try {
      if (container.alive) {
        try {
          process.kill(container.process.pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      await container.cgroup.killAll();
      await Promise.race([
        container.process.exited,
        new Promise((resolve) => setTimeout(resolve, DESTROY_WAIT_MS).unref()),
      ]);
      await container.cgroup.remove();
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'container cleanup was incomplete');
    } finally {
      await rm(container.paths.dir, { recursive: true, force: true }).catch(() => undefined);
      this.containers.delete(container.id);
      this.reportState(container, ContainerState.CONTAINER_STATE_REMOVED);
      log.debug({ checkpointId: container.checkpointId }, 'container removed');
    }
  }

  private onExit(container: Container): void {
    if (container.state === 'standby') {
      this.options.log.warn(
        { containerId: container.id, exit: container.exit },
        'a standby container died',
      );
      const list = this.standbys.get(container.checkpointId) ?? [];
      this.standbys.set(
        container.checkpointId,
        list.filter((standby) => standby !== container),
      );
      void this.destroy(container);
      return;
    }
    if (container.state === 'ready') {
      this.options.log.warn(
        { containerId: container.id, exit: container.exit },
        'an idle container died',
      );
      void this.destroy(container);
    }
    // A busy container's call sees its connection drop and releases it.
  }

  /** Memory used by all containers, standbys included, in bytes. */
  async memoryUsed(): Promise<number> {
    const all = [...this.list(), ...[...this.standbys.values()].flat()];
    const usages = await Promise.all(
      all.map((container) => container.cgroup.usage().catch(() => 0)),
    );
    return usages.reduce((sum, usage) => sum + usage, 0);
  }

  /** Starts destroying session containers idle for longer than EXECUTOR_TTL. */
  startReaper(): void {
    const every = Math.max(100, Math.min(this.options.idleTtlMs / 2, 30_000));
    this.reaper = setInterval(() => {
      const now = Date.now();
      for (const container of this.list()) {
        if (container.state === 'ready' && now - container.lastUsedAt > this.options.idleTtlMs) {
          this.options.log.info(
            { containerId: container.id },
            'idle container expired (EXECUTOR_TTL)',
          );
          void this.destroy(container);
        }
      }
    }, every);
    this.reaper.unref();
  }

  /** Resolves once the destructions and standby restores under way now have finished. */
  async settled(): Promise<void> {
    await Promise.all([...this.destructions.values(), ...this.preparations]);
  }

  /** Destroys every container and standby, waiting for destructions already under way. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.reaper) clearInterval(this.reaper);
    await Promise.all([...this.preparations]);
    const standbys = [...this.standbys.values()].flat();
    this.standbys.clear();
    await Promise.all([...this.list(), ...standbys].map((container) => this.destroy(container)));
    await Promise.all([...this.destructions.values()]);
  }

  private reportState(container: Container, state: ContainerState): void {
    if (state === ContainerState.CONTAINER_STATE_BUSY) container.reported = true;
    if (!container.reported) return;
    this.options.report({
      containerId: container.id,
      state,
      checkpointId: container.checkpointId,
    });
  }
}
