/**
 * Memory cgroups for containers, on cgroup v1 or v2 (detected at runtime). The worker owns one
 * parent cgroup (`readie/<worker id>` by default) and creates one child per container whose limit
 * is the call's memory budget.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findMemoryHierarchy, readCounter, type MemoryHierarchy } from './cgroup-mounts.js';

/** The memory cgroup hierarchy is missing or cannot be written; says what was tried. */
export class CgroupError extends Error {
  override readonly name = 'CgroupError';
}

/** A limit could not be applied (below current usage, say): names the container and the sizes. */
export class CgroupLimitError extends Error {
  override readonly name = 'CgroupLimitError';
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

async function readText(path: string): Promise<string> {
  return readFile(path, 'utf8');
}

function errorText(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException;
  return code ?? message;
}

/** One container's memory cgroup. */
export class ContainerCgroup {
  /** The limit last written, once one has been. */
  private applied: number | null = null;
  /** Whether the host accounts swap (v1 `memory.memsw.*`), once known. */
  private hasMemsw: boolean | null = null;

  constructor(
    /** v1 or v2. */
    readonly version: 1 | 2,
    /** Its directory. */
    readonly path: string,
  ) {}

  /** Its memory limit in bytes, as last set (0 before the first setLimit). */
  get limit(): number {
    return this.applied ?? 0;
  }

  /** The file a process writes "0" to in order to join. */
  get procsFile(): string {
    return join(this.path, 'cgroup.procs');
  }

  /**
   * Sets the memory limit (and, where the host has swap accounting, no swap beyond it). These are
   * kernel pseudo-files that never wait on a disk: synchronous writes keep a call's resume short.
   */
  async setLimit(bytes: number): Promise<void> {
    const limit = String(Math.max(0, Math.floor(bytes)));
    try {
      if (this.version === 2) {
        // v2 accepts any memory.max and then reclaims or OOM-kills down to it; v1 refuses a limit
        // below usage with EBUSY. Refuse it here too, so a resume fails the same way on both.
        if (this.applied !== null && bytes < this.applied) {
          const usage = Number(readFileSync(join(this.path, 'memory.current'), 'utf8'));
          if (usage > bytes) throw new Error('the new limit is below its usage');
        }
        writeFileSync(join(this.path, 'memory.max'), limit);
        // The swap limit never changes: set it once.
        if (this.applied === null && existsSync(join(this.path, 'memory.swap.max'))) {
          writeFileSync(join(this.path, 'memory.swap.max'), '0');
        }
        this.applied = bytes;
        return;
      }
      this.hasMemsw ??= existsSync(join(this.path, 'memory.memsw.limit_in_bytes'));
      const current =
        this.applied ?? Number(readFileSync(join(this.path, 'memory.limit_in_bytes'), 'utf8'));
      const memsw = join(this.path, 'memory.memsw.limit_in_bytes');
      // v1 insists that limit <= memsw.limit at every step: raise memsw first, lower it last.
      if (this.hasMemsw && bytes > current) writeFileSync(memsw, limit);
      writeFileSync(join(this.path, 'memory.limit_in_bytes'), limit);
      if (this.hasMemsw && bytes <= current) writeFileSync(memsw, limit);
      this.applied = bytes;
    } catch (error) {
      const usage = await this.usage().catch(() => NaN);
      throw new CgroupLimitError(
        `cannot set the memory limit of ${this.path} to ${limit} bytes (it uses ${usage} bytes): ${errorText(error)}`,
      );
    }
  }

  /** Memory in use, in bytes. */
  async usage(): Promise<number> {
    const file = this.version === 2 ? 'memory.current' : 'memory.usage_in_bytes';
    return Number(await readText(join(this.path, file)));
  }

  /** How many processes the kernel's OOM killer has killed in this cgroup. */
  async oomKills(): Promise<number> {
    try {
      if (this.version === 2) {
        return readCounter(await readText(join(this.path, 'memory.events')), 'oom_kill');
      }
      const control = await readText(join(this.path, 'memory.oom_control'));
      const kills = readCounter(control, 'oom_kill');
      if (kills > 0) return kills;
      // Kernels before 4.13 have no oom_kill line: a hit limit is the best evidence there is.
      return control.includes('oom_kill ')
        ? 0
        : Number(await readText(join(this.path, 'memory.failcnt')));
    } catch {
      return 0;
    }
  }

  /** The pids in this cgroup. */
  async pids(): Promise<number[]> {
    try {
      const text = await readText(this.procsFile);
      return text.split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** SIGKILLs every process in the cgroup. */
  async killAll(): Promise<void> {
    if (this.version === 2 && (await exists(join(this.path, 'cgroup.kill')))) {
      await writeFile(join(this.path, 'cgroup.kill'), '1').catch(() => undefined);
      return;
    }
    for (const pid of await this.pids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /** Kills what is left and removes the cgroup, retrying while the kernel still counts tasks. */
  async remove(): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await rmdir(this.path);
        return;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        if (code !== 'EBUSY' || attempt >= 100) {
          throw new CgroupError(`cannot remove the cgroup ${this.path}: ${errorText(error)}`);
        }
        await this.killAll();
        await sleep(Math.min(5 * (attempt + 1), 50));
      }
    }
  }
}

/** The worker's parent memory cgroup, under which each container gets its own. */
export class MemoryCgroups {
  private constructor(
    readonly hierarchy: MemoryHierarchy,
    /** The parent cgroup's directory. */
    readonly path: string,
    /** The directories `open` created (the parent and any missing ancestors), deepest last. */
    private readonly created: readonly string[],
  ) {}

  /**
   * Finds the memory hierarchy and creates the parent cgroup `parent` (relative to the
   * hierarchy's root, e.g. `readie/worker-1`), enabling the memory controller down to it on v2.
   */
  static async open(parent: string): Promise<MemoryCgroups> {
    const mountinfo = await readText('/proc/self/mountinfo');
    const hierarchy = findMemoryHierarchy(mountinfo);
    if (!hierarchy) {
      throw new CgroupError(
        'no memory cgroup hierarchy is mounted (neither v1 "memory" nor cgroup2)',
      );
    }
    const parts = parent.split('/').filter(Boolean);
    let path = hierarchy.mountPoint;
    const created: string[] = [];
    try {
      if (hierarchy.version === 2) {
        const controllers = await readText(join(path, 'cgroup.controllers'));
        if (!controllers.split(/\s+/).includes('memory')) {
          throw new CgroupError(`the memory controller is not available in ${path}`);
        }
      }
      for (const part of parts) {
        if (hierarchy.version === 2) await enableMemoryController(path);
        path = join(path, part);
        if (!(await exists(path))) {
          await mkdir(path);
          created.push(path);
        }
      }
      if (hierarchy.version === 2) await enableMemoryController(path);
    } catch (error) {
      if (error instanceof CgroupError) throw error;
      throw new CgroupError(`cannot create the memory cgroup ${path}: ${errorText(error)}`);
    }
    return new MemoryCgroups(hierarchy, path, created);
  }

  /** A new container cgroup with a memory limit. */
  async create(name: string, limitBytes: number): Promise<ContainerCgroup> {
    const path = join(this.path, name);
    try {
      await mkdir(path);
    } catch (error) {
      throw new CgroupError(`cannot create the memory cgroup ${path}: ${errorText(error)}`);
    }
    const cgroup = new ContainerCgroup(this.hierarchy.version, path);
    try {
      await cgroup.setLimit(limitBytes);
      if (this.hierarchy.version === 2) {
        // An OOM kill takes the whole container, not one process of it.
        await writeFile(join(path, 'memory.oom.group'), '1').catch(() => undefined);
      }
    } catch (error) {
      await cgroup.remove().catch(() => undefined);
      throw error;
    }
    return cgroup;
  }

  /** Kills and removes container cgroups left by an earlier run of this worker (a crash). */
  async removeStale(): Promise<string[]> {
    const entries = await readdir(this.path, { withFileTypes: true });
    const removed: string[] = [];
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      const stale = new ContainerCgroup(this.hierarchy.version, join(this.path, entry.name));
      await stale.killAll();
      await stale.remove();
      removed.push(entry.name);
    }
    return removed;
  }

  /**
   * Kills and removes whatever container cgroups are left, then removes the directories `open`
   * created that are now empty (another worker may still use a shared ancestor).
   */
  async close(): Promise<void> {
    await this.removeStale().catch(() => undefined);
    const ours = this.created.includes(this.path) ? [] : [this.path];
    for (const dir of [...ours, ...[...this.created].reverse()]) {
      try {
        await rmdir(dir);
      } catch {
        break;
      }
    }
  }
}

async function enableMemoryController(path: string): Promise<void> {
  const control = join(path, 'cgroup.subtree_control');
  const enabled = await readText(control);
  if (enabled.split(/\s+/).includes('memory')) return;
  try {
    await writeFile(control, '+memory');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EBUSY') throw error;
    throw new CgroupError(
      `cannot enable the memory controller below ${path}: it holds processes, and cgroup v2 puts controllers only above leaves; run the worker in a leaf cgroup (e.g. a systemd service with Delegate=yes) and point --cgroup-parent at a cgroup without processes`,
    );
  }
}
