/**
 * The worker's cgroups, on cgroup v1 or v2 (detected at runtime). The worker owns one parent
 * cgroup (`--cgroup-parent`) in the memory and pids hierarchies (one directory on v2) and creates
 * one child per container. It removes only what it created: its own containers, the container
 * cgroups an earlier run of it left (named by that run's state directory), and the parent
 * directories it made, once empty.
 */
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findCgroupHierarchies, type CgroupHierarchies } from '../core/sandbox/cgroup-mounts.js';
import { CgroupError, ContainerCgroup, errorText } from './container-cgroup.js';

export { CgroupError, CgroupLimitError, ContainerCgroup } from './container-cgroup.js';

/** Limits a new container cgroup starts with. */
export interface CgroupLimits {
  /** Bytes of memory (the call's budget). */
  readonly memory: number;
  /** Tasks at once; null for none (the unhardened benchmark path). */
  readonly pids: number | null;
}

/** The worker's parent cgroup, under which each container gets its own. */
export class ContainerCgroups {
  private constructor(
    readonly hierarchies: CgroupHierarchies,
    /** The parent cgroup relative to each hierarchy's root, e.g. `readie/worker-1-0a1b2c3d`. */
    readonly parent: string,
    /** The directories `open` created (parents and missing ancestors), deepest last. */
    private readonly created: string[],
  ) {}

  /** cgroup v1 or v2. */
  get version(): 1 | 2 {
    return this.hierarchies.version;
  }

  /** The parent's directory in the memory hierarchy (the unified one on v2). */
  get path(): string {
    return join(this.memoryRoot, this.parent);
  }

  private get memoryRoot(): string {
    const h = this.hierarchies;
    return h.version === 2 ? h.unified : h.memory;
  }

  /** The roots the parent lives in: memory (and pids on v1, when mounted). */
  private get roots(): string[] {
    const h = this.hierarchies;
    if (h.version === 2) return [h.unified];
    return h.pids ? [h.memory, h.pids] : [h.memory];
  }

  /**
   * Finds the hierarchies and creates the parent cgroup `parent` (relative to each hierarchy's
   * root), enabling the memory and pids controllers down to it on v2.
   */
  static async open(parent: string): Promise<ContainerCgroups> {
    const hierarchies = findCgroupHierarchies(await readFile('/proc/self/mountinfo', 'utf8'));
    if (!hierarchies) {
      throw new CgroupError(
        'no memory cgroup hierarchy is mounted (neither v1 "memory" nor cgroup2)',
      );
    }
    if (hierarchies.version === 1 && hierarchies.pids === null) {
      throw new CgroupError(
        'cgroup v1 without a "pids" hierarchy: mount one (every container has a pids limit)',
      );
    }
    const cgroups = new ContainerCgroups(hierarchies, parent, []);
    await cgroups.ensureParent();
    return cgroups;
  }

  /** Creates the parent (and missing ancestors) in every hierarchy; safe to call again. */
  private async ensureParent(): Promise<void> {
    const parts = this.parent.split('/').filter(Boolean);
    for (const root of this.roots) {
      let path = root;
      try {
        if (this.version === 2) {
          const controllers = (await readFile(join(path, 'cgroup.controllers'), 'utf8')).split(
            /\s+/,
          );
          for (const controller of ['memory', 'pids']) {
            if (!controllers.includes(controller)) {
              throw new CgroupError(`the ${controller} controller is not available in ${path}`);
            }
          }
        }
        for (const part of parts) {
          if (this.version === 2) await enableControllers(path);
          path = join(path, part);
          try {
            await mkdir(path);
            if (!this.created.includes(path)) this.created.push(path);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
          }
        }
        if (this.version === 2) await enableControllers(path);
      } catch (error) {
        if (error instanceof CgroupError) throw error;
        throw new CgroupError(`cannot create the cgroup ${path}: ${errorText(error)}`);
      }
    }
  }

  private containerCgroup(name: string): ContainerCgroup {
    const h = this.hierarchies;
    if (h.version === 2) return new ContainerCgroup(2, join(h.unified, this.parent, name));
    return new ContainerCgroup(
      1,
      join(h.memory, this.parent, name),
      h.pids ? join(h.pids, this.parent, name) : null,
    );
  }

  /**
   * A new container cgroup with its limits. A parent that vanished (removed from outside) is
   * created again rather than failing every call from then on.
   */
  async create(name: string, limits: CgroupLimits): Promise<ContainerCgroup> {
    const cgroup = this.containerCgroup(name);
    const dirs = [...new Set([cgroup.path, cgroup.pidsPath].filter(Boolean))];
    for (const dir of dirs) {
      try {
        await mkdir(dir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
          await cgroup.remove().catch(() => undefined);
          throw new CgroupError(`cannot create the cgroup ${dir}: ${errorText(error)}`);
        }
        try {
          await this.ensureParent();
          await mkdir(dir);
        } catch (again) {
          await cgroup.remove().catch(() => undefined);
          throw new CgroupError(`cannot create the cgroup ${dir}: ${errorText(again)}`);
        }
      }
    }
    try {
      await cgroup.setLimit(limits.memory);
      if (limits.pids !== null) cgroup.setPidsLimit(limits.pids);
      if (this.version === 2) {
        // An OOM kill takes the whole container, not one process of it.
        await writeFile(join(cgroup.path, 'memory.oom.group'), '1').catch(() => undefined);
      }
    } catch (error) {
      await cgroup.remove().catch(() => undefined);
      throw error;
    }
    return cgroup;
  }

  /**
   * Kills and removes the cgroups of `containerIds`, left by an earlier run of this worker (a
   * crash); returns those that existed. Nothing else under the parent is touched: another
   * worker may share it.
   */
  async removeLeftovers(containerIds: readonly string[]): Promise<string[]> {
    const removed: string[] = [];
    for (const id of containerIds) {
      if (!/^c-[0-9a-f]+$/.test(id)) continue;
      const stale = this.containerCgroup(id);
      if ((await stale.pids()).length === 0 && !(await isDir(stale.path))) continue;
      await stale.killAll();
      await stale.remove();
      removed.push(id);
    }
    return removed;
  }

  /** Removes the directories `open` created, deepest first, while they are empty. */
  async close(): Promise<void> {
    for (const dir of [...this.created].reverse()) {
      try {
        await rmdir(dir);
      } catch {
        // Not empty (another worker's, or a container still being removed): leave it.
      }
    }
  }
}

async function isDir(path: string): Promise<boolean> {
  try {
    await readFile(join(path, 'cgroup.procs'), 'utf8');
    return true;
  } catch {
    return false;
  }
}

async function enableControllers(path: string): Promise<void> {
  const control = join(path, 'cgroup.subtree_control');
  const enabled = (await readFile(control, 'utf8')).split(/\s+/);
  const missing = ['memory', 'pids'].filter((controller) => !enabled.includes(controller));
  if (missing.length === 0) return;
  try {
    await writeFile(control, missing.map((controller) => `+${controller}`).join(' '));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EBUSY') throw error;
    throw new CgroupError(
      `cannot enable the memory and pids controllers below ${path}: it holds processes, and cgroup v2 puts controllers only above leaves; run the worker in a leaf cgroup (e.g. a systemd service with Delegate=yes) and point --cgroup-parent at a cgroup without processes`,
    );
  }
}
