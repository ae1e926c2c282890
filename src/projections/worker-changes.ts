/**
 * Which workers a working copy changed, for readers that keep something derived from its workers.
 *
 * Over a working copy (see `fold.ts`) the `workers` map is changed in place, so a reader cannot
 * tell it changed by its identity. Such a reader watches the map and, before each use, takes the
 * IDs of the workers replaced or added since it last looked, instead of comparing every worker.
 * Only a watched map pays for this: the projection copies and notes changed workers only there
 * (a fold nobody watches, or an immer draft, changes records as it likes). A journal that grows past
 * `MOST_CHANGES` stops recording and says so; its reader then compares every worker once.
 */
import type { WorkerRecord } from './cluster-state.js';

type Workers = ReadonlyMap<string, WorkerRecord>;

/** What a watcher takes: the changed IDs in order (repeats possible), or that it lost track. */
export interface WorkerChanges {
  ids: string[];
  overflowed: boolean;
  /** The map it watches (a watcher watches one map at a time). */
  watching?: Workers;
}

const MOST_CHANGES = 4096;

const journals = new WeakMap<Workers, WorkerChanges[]>();

/** Starts `watcher`'s journal of changes to `workers`, empty; it stops watching any other map. */
export function watchWorkers(workers: Workers, watcher: WorkerChanges): void {
  watcher.ids.length = 0;
  watcher.overflowed = false;
  if (watcher.watching === workers) return;
  if (watcher.watching !== undefined) {
    const others = (journals.get(watcher.watching) ?? []).filter((w) => w !== watcher);
    if (others.length > 0) journals.set(watcher.watching, others);
    else journals.delete(watcher.watching);
  }
  watcher.watching = workers;
  journals.set(workers, [...(journals.get(workers) ?? []), watcher]);
}

/** Whether anyone watches `workers` (then the projection must copy the workers it changes). */
export function isWatched(workers: Workers): boolean {
  return journals.has(workers);
}

/** Records that the worker `workerId` of `workers` was replaced or added (the projection calls it). */
export function noteWorkerChange(workers: Workers, workerId: string): void {
  const watching = journals.get(workers);
  if (watching === undefined) return;
  for (const journal of watching) {
    if (journal.overflowed) continue;
    if (journal.ids.length < MOST_CHANGES) journal.ids.push(workerId);
    else journal.overflowed = true;
  }
}
