/**
 * Reconciliation: what a worker's full report (its registration or a load report listing every
 * container it holds) does to the router's container records. The report is the worker's word,
 * so records it no longer lists are dropped and the ones it lists are added or updated, except
 * where the router heard of a container after the report was taken: the worker numbers its
 * reports (`reportSeq`), and a record told of by a later report stays as it is. The one owner of
 * that rule: the fold applies it, and the core asks it which containers a report drops to append
 * their consequences (docs/cluster-state.md).
 */
import type { EventOf } from '../events/types.js';
import type { ContainerRecord, SessionContainer, WorkerRecord } from './cluster-state.js';

/** A container as a full report lists it. */
export type ContainerEntry = NonNullable<EventOf<'WorkerUtilization'>['containers']>[number];

/** What a full report changes. */
export interface Reconciliation {
  /** The report is older than a full report already folded: it changes nothing. */
  readonly stale: boolean;
  /** Records the report drops (in the order the worker's map holds them). */
  readonly dropped: readonly string[];
  /** Entries the report adds or updates. */
  readonly kept: readonly ContainerEntry[];
}

/** Whether a record was told of by a report taken after `reportSeq`. */
export function toldAfter(record: Pick<ContainerRecord, 'reportSeq'>, reportSeq: number | null) {
  return record.reportSeq !== null && reportSeq !== null && record.reportSeq > reportSeq;
}

/** Whether a full report numbered `reportSeq` is older than the worker's last one folded. */
export function isStaleFullReport(
  worker: Pick<WorkerRecord, 'lastFullReportSeq'>,
  reportSeq: number | null,
): boolean {
  return (
    reportSeq !== null && worker.lastFullReportSeq !== null && reportSeq <= worker.lastFullReportSeq
  );
}

/**
 * Whether a single container report numbered `reportSeq` is out of date: a later report already
 * told of the container, or a later full report said what the worker holds without it.
 */
export function isStaleContainerReport(
  worker: Pick<WorkerRecord, 'containers' | 'lastFullReportSeq'>,
  containerId: string,
  reportSeq: number | null,
): boolean {
  const known = worker.containers.get(containerId);
  if (known) return toldAfter(known, reportSeq);
  return (
    reportSeq !== null && worker.lastFullReportSeq !== null && reportSeq < worker.lastFullReportSeq
  );
}

/** What the full report `entries` (numbered `reportSeq`) does to `worker`'s records. */
export function reconcile(
  worker: Pick<WorkerRecord, 'containers' | 'lastFullReportSeq'>,
  entries: readonly ContainerEntry[],
  reportSeq: number | null,
): Reconciliation {
  if (isStaleFullReport(worker, reportSeq)) return { stale: true, dropped: [], kept: [] };
  const listed = new Set(entries.map((entry) => entry.containerId));
  const dropped: string[] = [];
  for (const record of worker.containers.values()) {
    if (!listed.has(record.containerId) && !toldAfter(record, reportSeq)) {
      dropped.push(record.containerId);
    }
  }
  const kept = entries.filter((entry) => {
    const known = worker.containers.get(entry.containerId);
    return known === undefined || !toldAfter(known, reportSeq);
  });
  return { stale: false, dropped, kept };
}

/**
 * The worker's session containers (rules 7 on) once the full report `entries` is folded, its
 * records `dropped` gone: a dropped record's goes with it; one with a record, or listed, stays;
 * one the worker has reported nothing of and the report leaves out stays once (the report may
 * have been taken before the container was made) and goes with the next report that leaves it
 * out, so a container whose removal report was lost holds its slot one report interval at most.
 */
export function sessionContainersAfter(
  worker: Pick<WorkerRecord, 'containers' | 'sessionContainers'>,
  entries: readonly ContainerEntry[],
  dropped: readonly string[],
): Map<string, SessionContainer> {
  const after = new Map<string, SessionContainer>();
  if (worker.sessionContainers.size === 0) return after;
  const gone = new Set(dropped);
  const listed = new Set(entries.map((entry) => entry.containerId));
  for (const [containerId, held] of worker.sessionContainers) {
    if (gone.has(containerId)) continue;
    if (worker.containers.has(containerId) || listed.has(containerId)) {
      after.set(containerId, held.unlisted ? { ...held, unlisted: false } : held);
    } else if (!held.unlisted) {
      after.set(containerId, { ...held, unlisted: true });
    }
  }
  return after;
}
