/**
 * Rendezvous (highest random weight) hashing of a tenant's version over workers: each worker's
 * score for a key is the first 8 bytes, read as an unsigned big-endian integer, of SHA-256 over
 * the UTF-8 bytes of `tenantId + "\n" + version + "\n" + workerId`; the subset is the k highest
 * scores, equal scores broken by worker ID as text, ascending. Removing a worker moves only the
 * keys whose subset held it; raising k only adds workers. The hash is the contract: every
 * implementation and every replay computes the same subsets.
 */
import { createHash } from 'node:crypto';
import { compareText } from '../../../projections/queries.js';

/** A worker's score for one key. */
export interface ScoredWorker {
  readonly workerId: string;
  readonly score: bigint;
}

/** The rendezvous score of `workerId` for the key (tenant, version). */
export function rendezvousScore(tenantId: string, version: string, workerId: string): bigint {
  return createHash('sha256')
    .update(`${tenantId}\n${version}\n${workerId}`, 'utf8')
    .digest()
    .readBigUInt64BE(0);
}

/** Negative when `a` ranks before `b`: the higher score first, then the worker ID ascending. */
export function compareScored(a: ScoredWorker, b: ScoredWorker): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  return compareText(a.workerId, b.workerId);
}

/** Every worker of `workerIds` scored for the key, best first. */
export function rankedByScore(
  tenantId: string,
  version: string,
  workerIds: Iterable<string>,
): ScoredWorker[] {
  const scored: ScoredWorker[] = [];
  for (const workerId of workerIds) {
    scored.push({ workerId, score: rendezvousScore(tenantId, version, workerId) });
  }
  return scored.sort(compareScored);
}

/** The k best of `workerIds` for the key (all of them when there are fewer), best first. */
export function rendezvousSubset(
  tenantId: string,
  version: string,
  workerIds: Iterable<string>,
  k: number,
): string[] {
  return rankedByScore(tenantId, version, workerIds)
    .slice(0, k)
    .map((scored) => scored.workerId);
}
