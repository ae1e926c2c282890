/**
 * One worker process per state directory and per parent cgroup on a machine. A worker cleans both
 * up at start (containers an earlier run left), so a second process started with the same worker
 * ID (whose parent cgroup defaults to `readie/<id>`) or the same `--state-dir` would kill the
 * first one's containers before the router could refuse it. Each is claimed with a lock file
 * created exclusively and holding the process's pid; a lock left by a process that is gone (even
 * killed) is taken over. Across machines the router tells worker processes apart (instance IDs).
 */
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkerStartupError } from './errors.js';

/** Where the locks of parent cgroups live (one machine's cgroups, so one machine's run dir). */
export const CGROUP_LOCK_DIR = '/run/readie/cgroups';

/** A lock this process holds. */
export interface ProcessLock {
  readonly path: string;
  /** Removes the lock file if it is still this process's. */
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims `path` for this process; throws WorkerStartupError naming `what` and the process that
 * holds it while that process lives.
 */
export async function takeProcessLock(path: string, what: string): Promise<ProcessLock> {
  const mine = String(process.pid);
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      await writeFile(path, `${mine}\n`, { flag: 'wx', mode: 0o600 });
      return {
        path,
        async release() {
          const holder = await readFile(path, 'utf8').catch(() => '');
          if (holder.trim() === mine) await unlink(path).catch(() => undefined);
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new WorkerStartupError(`cannot lock ${what} (${path}): ${(error as Error).message}`);
      }
    }
    const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
      throw new WorkerStartupError(
        `another worker process (pid ${holder}) uses ${what} on this machine: stop it, or give this worker another --id (and --state-dir)`,
      );
    }
    // Left by a process that is gone: take it over.
    await unlink(path).catch(() => undefined);
  }
  throw new WorkerStartupError(`cannot lock ${what} (${path}): another process keeps taking it`);
}

/** The lock file of a parent cgroup (`readie/w1` -> `/run/readie/cgroups/readie%2Fw1.lock`). */
export async function cgroupLockPath(parent: string, dir = CGROUP_LOCK_DIR): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return join(dir, `${encodeURIComponent(parent)}.lock`);
}
