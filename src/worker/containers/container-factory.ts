/**
 * Making a container: its files, its memory cgroup, its spec, and its first process, restored
 * from a checkpoint or started cold.
 */
import { chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { RestoreBackend } from '../checkpoints/restore-backend.js';
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

/** What making containers needs. */
export interface ContainerFactoryOptions {
  readonly workerId: string;
  readonly stateDir: string;
  /** The unprivileged user and group user code runs as. */
  readonly uid: number;
  readonly gid: number;
  readonly python: string;
  /** The wheel directory to bind into every container, if installs use one. */
  readonly wheelDir: string | null;
  readonly cgroups: MemoryCgroups;
  readonly backend: RestoreBackend;
  readonly log: Logger;
}

/** Makes containers. */
export class ContainerFactory {
  constructor(private readonly options: ContainerFactoryOptions) {}

  /**
   * Makes a container with `memory` as its limit: restored from `checkpointId` when it is not
   * empty (throwing the restore's error if that fails), else cold. Falling back to a cold start
   * is the pool's decision (ContainerPool.create).
   */
  async make(memory: number, checkpointId: string): Promise<Container> {
    const { options } = this;
    const id = newContainerId();
    const paths = containerPaths(options.stateDir, id);
    let cgroup: ContainerCgroup | null = null;
    try {
      await mkdir(paths.readieDir, { recursive: true, mode: 0o700 });
      await chown(paths.tmpDir, options.uid, options.gid);
      await chown(paths.readieDir, options.uid, options.gid);
      if (options.wheelDir) await mkdir(join(paths.readieDir, 'wheels'));
      cgroup = await options.cgroups.create(id, memory);
      const spec = containerSpec({
        containerId: id,
        workerId: options.workerId,
        stateDir: options.stateDir,
        cgroupProcs: cgroup.procsFile,
        uid: options.uid,
        gid: options.gid,
        workerPid: process.pid,
        wheelDir: options.wheelDir,
      });
      const started: ContainerProcess =
        checkpointId !== ''
          ? await options.backend.restore(checkpointId, spec)
          : await coldStart({ python: options.python, log: options.log }, spec);
      return new Container(id, checkpointId, cgroup, paths, started);
    } catch (error) {
      await cgroup?.killAll().catch(() => undefined);
      await cgroup?.remove().catch(() => undefined);
      await rm(paths.dir, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
  }
}
