/**
 * One worker process per state directory and per parent cgroup on a machine. A worker cleans both
 * up at start (containers an earlier run left), so a second process started with the same
 * `--state-dir`, or the same parent cgroup, would kill the first one's containers before the
 * router could refuse it. Each is claimed with a lock file created exclusively (0600) naming the
 * process by pid and start time; a lock left by a process that is gone (even killed, or whose pid
 * was reused) is taken over. Across machines the router tells worker processes apart (instance
 * IDs).
 */
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkerStartupError } from './core/errors.js';
import { processStartTime } from './sandbox/index.js';

/** Where the locks of parent cgroups live (one machine's cgroups, so one machine's run dir). */
export const CGROUP_LOCK_DIR = '/run/readie/cgroups';

/** A lock this process holds. */
export interface ProcessLock {
  readonly path: string;
  /** Removes the lock file if it is still this process's; safe to call twice. */
  release(): Promise<void>;
}

interface Holder {
  readonly pid: number;
  readonly start: string | null;
}

function holderOf(text: string): Holder | null {
  try {
    const value = JSON.parse(text) as { pid?: unknown; start?: unknown };
    if (typeof value.pid !== 'number' || !Number.isInteger(value.pid) || value.pid <= 0)
      return null;
    return { pid: value.pid, start: typeof value.start === 'string' ? value.start : null };
  } catch {
    // half-written or garbage: a crash while writing it
    return null;
  }
}

/** Whether the process that wrote the lock still runs (the same process, not a reused pid). */
async function holds(holder: Holder): Promise<boolean> {
  const start = await processStartTime(holder.pid);
  return start !== null && (holder.start === null || start === holder.start);
}

/**
 * Claims `path` for this process; throws WorkerStartupError with `inUse(pid)` while the process
 * that holds it lives. `shareWithinProcess` lets a second worker in the same process (a test
 * harness runs several) take a lock this process already holds.
 */
export async function takeProcessLock(
  path: string,
  inUse: (pid: number) => string,
  shareWithinProcess = false,
): Promise<ProcessLock> {
  const mine = JSON.stringify({ pid: process.pid, start: await processStartTime(process.pid) });
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      await writeFile(path, mine, { flag: 'wx', mode: 0o600 });
      return {
        path,
        async release() {
          const text = await readFile(path, 'utf8').catch(() => '');
          if (text === mine) await unlink(path).catch(() => undefined);
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new WorkerStartupError(`cannot lock ${path}: ${(error as Error).message}`);
      }
    }
    const holder = holderOf(await readFile(path, 'utf8').catch(() => ''));
    const shared = shareWithinProcess && holder?.pid === process.pid;
    if (holder !== null && !shared && (await holds(holder))) {
      throw new WorkerStartupError(inUse(holder.pid));
    }
    // Left by a process that is gone: take it over.
    await unlink(path).catch(() => undefined);
  }
  throw new WorkerStartupError(`cannot lock ${path}: another process keeps taking it`);
}

/** Claims the parent cgroup `parent` (`readie/w1` -> `/run/readie/cgroups/readie%2Fw1.lock`). */
export async function lockCgroupParent(
  parent: string,
  workerId: string,
  dir = CGROUP_LOCK_DIR,
): Promise<ProcessLock> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return takeProcessLock(
    join(dir, `${encodeURIComponent(parent)}.lock`),
    (pid) =>
      `another worker process (pid ${pid}) uses the parent cgroup ${parent} (worker ID ${workerId}) on this machine: stop it, or give this worker another --id (and --state-dir)`,
    true,
  );
}

/**
 * Claims `stateDir` (creating it 0700) through `<state-dir>/worker.pid`; null when the directory
 * cannot be used at all (the state directory check reports why).
 */
export async function lockStateDir(stateDir: string): Promise<ProcessLock | null> {
  try {
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
  } catch {
    return null;
  }
  return takeProcessLock(
    join(stateDir, 'worker.pid'),
    (pid) =>
      `the state directory ${stateDir} is in use by worker process ${pid}: give each worker its own --state-dir`,
  );
}
