/**
 * One worker per state directory: `<state-dir>/worker.pid` names the live worker that uses it. A
 * second worker on the same directory would delete the first one's container files at startup
 * and remove its containers' cgroups as leftovers, so it refuses to start instead. A file left by
 * a worker that is gone (a crash) is taken over.
 */
import { mkdirSync } from 'node:fs';
import { open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkerStartupError } from './errors.js';
import { processStartTime } from './sandbox/index.js';

const LOCK_FILE = 'worker.pid';

/** The claim of a state directory by this worker process. */
export class StateDirLock {
  private released = false;

  private constructor(private readonly path: string) {}

  /**
   * Takes `stateDir` (creating it 0700), or throws WorkerStartupError naming its live owner;
   * null when the directory cannot be used at all (the state directory check reports why).
   */
  static async acquire(stateDir: string): Promise<StateDirLock | null> {
    try {
      mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    } catch {
      return null;
    }
    const path = join(stateDir, LOCK_FILE);
    const start = await processStartTime(process.pid);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        const file = await open(path, 'wx', 0o600);
        await file.writeFile(JSON.stringify({ pid: process.pid, start }));
        await file.close();
        return new StateDirLock(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return null;
      }
      let owner: { pid?: number; start?: string } = {};
      try {
        owner = JSON.parse(await readFile(path, 'utf8')) as typeof owner;
      } catch {
        // half-written or garbage: a crash while writing it
      }
      if (typeof owner.pid === 'number') {
        const ownerStart = await processStartTime(owner.pid);
        if (ownerStart !== null && ownerStart === owner.start) {
          throw new WorkerStartupError(
            `the state directory ${stateDir} is in use by worker process ${owner.pid}: give each worker its own --state-dir`,
          );
        }
      }
      await rm(path, { force: true });
    }
    throw new WorkerStartupError(`could not take the state directory ${stateDir} (${path})`);
  }

  /** Gives the directory up; safe to call twice. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    await rm(this.path, { force: true });
  }
}
