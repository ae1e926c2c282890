/**
 * Reading a log another process is writing, as a poller should: one read-only handle kept per
 * directory and refreshed on each read. Opening such a log again and again while it is written
 * can make LMDB forget a commit of the writer (docs/event-log.md). The handles are closed after
 * each test (`closeLiveLogs`, a root hook).
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EventLog, type ClusterEvent } from '../../src/events/index.js';

/** The kept handles by directory, with the data file's inode (a log made anew is opened anew). */
const held = new Map<string, { inode: number; log: EventLog }>();

/**
 * Closes of handles not awaited where they were made (a sync read): awaited after each test, so
 * no environment is still closing when the test's directories are removed or the next opens.
 */
const closing = new Set<Promise<void>>();

/** Closes `log` without waiting here; `closeLiveLogs` waits for it. */
export function closeLater(log: EventLog): void {
  const closed = log.close().catch(() => undefined);
  closing.add(closed);
  void closed.finally(() => closing.delete(closed));
}

/** Whether another live process holds the writer lock of `dir`. */
function writtenElsewhere(dir: string): boolean {
  try {
    const owner = JSON.parse(readFileSync(join(dir, 'writer.lock'), 'utf8')) as { pid?: unknown };
    if (typeof owner.pid !== 'number' || owner.pid === process.pid) return false;
    process.kill(owner.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Every event of the log in `dir` when another process is writing it, read through the handle
 * kept for it; undefined when no other process writes it (the caller opens it as it likes).
 */
export function readLiveLog(dir: string): ClusterEvent[] | undefined {
  if (!writtenElsewhere(dir)) {
    // The writer is gone: the kept handle goes too. While one is open, an open in this process
    // shares its environment, whose lock file shows the transaction id the writer last
    // published: a writer killed (SIGKILL) right after a commit may not have published it yet.
    // Opened anew, LMDB reads the newest commit from the data file. (A read-only close lets go
    // of the environment at once, before its promise settles.)
    const kept = held.get(dir);
    if (kept) closeLater(kept.log);
    held.delete(dir);
    return undefined;
  }
  const inode = statSync(join(dir, 'events.mdb')).ino;
  let kept = held.get(dir);
  if (kept && kept.inode !== inode) {
    closeLater(kept.log);
    kept = undefined;
  }
  if (!kept) {
    kept = { inode, log: EventLog.open(dir, { readOnly: true }) };
    held.set(dir, kept);
  }
  kept.log.refresh();
  return [...kept.log.read()];
}

/** Closes the kept handles, and waits for every close begun elsewhere (after each test). */
export async function closeLiveLogs(): Promise<void> {
  const logs = [...held.values()];
  held.clear();
  await Promise.all([...logs.map(({ log }) => log.close()), ...closing]);
}
