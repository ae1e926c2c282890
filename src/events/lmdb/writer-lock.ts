/**
 * The single-writer lock of an event log directory: a `writer.lock` file created exclusively and
 * holding the writer's pid. A lock left by a process that died (even by SIGKILL) is taken over;
 * a lock held by a live process is refused with a clear error.
 */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { EventLogError, LogLockedError } from '../errors.js';

const LOCK_FILE = 'writer.lock';

interface LockOwner {
  readonly pid: number;
  readonly host: string;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readOwner(path: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockOwner>;
    if (typeof owner.pid === 'number' && typeof owner.host === 'string') {
      return { pid: owner.pid, host: owner.host };
    }
  } catch {
    // A torn or unreadable lock file is treated as stale below.
  }
  return undefined;
}

/** A held writer lock; `release` removes it. */
export class WriterLock {
  private released = false;

  private constructor(private readonly path: string) {}

  /** Takes the lock of `dir`, or throws `EventLogError` naming the process that holds it. */
  static acquire(dir: string): WriterLock {
    const path = join(dir, LOCK_FILE);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        const fd = openSync(path, 'wx', 0o600);
        writeSync(fd, JSON.stringify({ pid: process.pid, host: hostname() }));
        closeSync(fd);
        return new WriterLock(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const owner = readOwner(path);
      if (owner && owner.host === hostname() && owner.pid !== process.pid && isAlive(owner.pid)) {
        throw new LogLockedError(
          `event log ${dir} is being written by process ${owner.pid}; only one writer may open a log (open it read-only to read beside the writer)`,
        );
      }
      if (owner && owner.pid === process.pid && owner.host === hostname()) {
        throw new EventLogError(`event log ${dir} is already open for writing in this process`);
      }
      if (owner && owner.host !== hostname()) {
        throw new LogLockedError(
          `event log ${dir} is locked by process ${owner.pid} on host ${owner.host}; remove ${path} only if that process is gone`,
        );
      }
      rmSync(path, { force: true });
    }
    throw new EventLogError(`could not take the writer lock ${path}`);
  }

  /** Gives the lock up; safe to call twice. */
  release(): void {
    if (this.released) return;
    this.released = true;
    rmSync(this.path, { force: true });
  }
}
