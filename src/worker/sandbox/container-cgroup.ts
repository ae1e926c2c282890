/**
 * One container's cgroups: its memory limit (with swap and, on v1, socket buffers bound by it)
 * and its pids limit. On v2 both controllers are one directory; on v1 they are one directory in
 * each hierarchy.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { access, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readCounter } from '../core/sandbox/cgroup-mounts.js';

/** The cgroup hierarchy is missing or cannot be written; says what was tried. */
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

/** An errno code, or the message of an error without one. */
export function errorText(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException;
  return code ?? message;
}

/** One container's cgroups. */
export class ContainerCgroup {
  /** The limit last written, once one has been. */
  private applied: number | null = null;
  /** Whether the host accounts swap (v1 `memory.memsw.*`), once known. */
  private hasMemsw: boolean | null = null;
  /** Whether v1 accounts this cgroup's TCP buffers (`memory.kmem.tcp.*`), once known. */
  private hasTcp: boolean | null = null;
  /** The pids controller's directory: the memory one on v2, its own on v1. */
  readonly pidsPath: string;

  constructor(
    /** v1 or v2. */
    readonly version: 1 | 2,
    /** Its memory controller's directory. */
    readonly path: string,
    /** On v1, its directory in the pids hierarchy (none: no pids limit applies). */
    pidsPath?: string | null,
  ) {
    this.pidsPath = version === 2 ? path : (pidsPath ?? '');
  }

  /** Its memory limit in bytes, as last set (0 before the first setLimit). */
  get limit(): number {
    return this.applied ?? 0;
  }

  /** The file a process writes "0" to in order to join (the memory controller's). */
  get procsFile(): string {
    return join(this.path, 'cgroup.procs');
  }

  /** Every cgroup.procs a container's first process joins: one per hierarchy. */
  get procsFiles(): string[] {
    const files = [this.procsFile];
    if (this.pidsPath !== '' && this.pidsPath !== this.path) {
      files.push(join(this.pidsPath, 'cgroup.procs'));
    }
    return files;
  }

  /** Its directories: one per hierarchy. */
  private get dirs(): string[] {
    return this.pidsPath !== '' && this.pidsPath !== this.path
      ? [this.path, this.pidsPath]
      : [this.path];
  }

  /**
   * Sets the memory limit (and, where the host has swap accounting, no swap beyond it; on v1 the
   * same limit on TCP socket buffers, which v1 does not count as memory and v2 does). These are
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
      this.hasTcp ??= existsSync(join(this.path, 'memory.kmem.tcp.limit_in_bytes'));
      const current =
        this.applied ?? Number(readFileSync(join(this.path, 'memory.limit_in_bytes'), 'utf8'));
      const memsw = join(this.path, 'memory.memsw.limit_in_bytes');
      // v1 insists that limit <= memsw.limit at every step: raise memsw first, lower it last.
      if (this.hasMemsw && bytes > current) writeFileSync(memsw, limit);
      writeFileSync(join(this.path, 'memory.limit_in_bytes'), limit);
      if (this.hasMemsw && bytes <= current) writeFileSync(memsw, limit);
      // v1 accounts TCP buffers only once a limit is written, so the first write comes before
      // the container exists (creation sets the limit before anything joins).
      if (this.hasTcp) writeFileSync(join(this.path, 'memory.kmem.tcp.limit_in_bytes'), limit);
      this.applied = bytes;
    } catch (error) {
      const usage = await this.usage().catch(() => NaN);
      throw new CgroupLimitError(
        `cannot set the memory limit of ${this.path} to ${limit} bytes (it uses ${usage} bytes): ${errorText(error)}`,
      );
    }
  }

  /** Sets the most tasks (processes and threads) the container may hold at once. */
  setPidsLimit(count: number): void {
    if (this.pidsPath === '') return;
    try {
      writeFileSync(join(this.pidsPath, 'pids.max'), String(Math.max(1, Math.floor(count))));
    } catch (error) {
      throw new CgroupLimitError(
        `cannot set the pids limit of ${this.pidsPath} to ${count}: ${errorText(error)}`,
      );
    }
  }

  /** Moves a process (the egress network stack) into every cgroup of the container. */
  async adopt(pid: number): Promise<void> {
    for (const file of this.procsFiles) await writeFile(file, String(pid));
  }

  /** Memory in use, in bytes. */
  async usage(): Promise<number> {
    const file = this.version === 2 ? 'memory.current' : 'memory.usage_in_bytes';
    return Number(await readFile(join(this.path, file), 'utf8'));
  }

  /** How many processes the kernel's OOM killer has killed in this cgroup. */
  async oomKills(): Promise<number> {
    try {
      if (this.version === 2) {
        return readCounter(await readFile(join(this.path, 'memory.events'), 'utf8'), 'oom_kill');
      }
      const control = await readFile(join(this.path, 'memory.oom_control'), 'utf8');
      const kills = readCounter(control, 'oom_kill');
      if (kills > 0) return kills;
      // Kernels before 4.13 have no oom_kill line: a hit limit is the best evidence there is.
      return control.includes('oom_kill ')
        ? 0
        : Number(await readFile(join(this.path, 'memory.failcnt'), 'utf8'));
    } catch {
      return 0;
    }
  }

  /** The pids in this cgroup. */
  async pids(): Promise<number[]> {
    const found = new Set<number>();
    for (const file of this.procsFiles) {
      try {
        const text = await readFile(file, 'utf8');
        for (const pid of text.split('\n').filter(Boolean)) found.add(Number(pid));
      } catch {
        // gone already
      }
    }
    return [...found];
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

  /** Kills what is left and removes the cgroups, retrying while the kernel still counts tasks. */
  async remove(): Promise<void> {
    for (const dir of this.dirs) {
      for (let attempt = 0; ; attempt += 1) {
        try {
          await rmdir(dir);
          break;
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') break;
          if (code !== 'EBUSY' || attempt >= 100) {
            throw new CgroupError(`cannot remove the cgroup ${dir}: ${errorText(error)}`);
          }
          await this.killAll();
          await sleep(Math.min(5 * (attempt + 1), 50));
        }
      }
    }
  }
}
