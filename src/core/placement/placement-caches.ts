/**
 * What placement may remember between decisions, in one object its caller owns: the candidate
 * index (kept in step with the caller's state by the fold, as its `WorkerChangeSink`) and parsed
 * package requirements. A cache never changes an answer: placement without one decides the same.
 */
import type { WorkerChangeSink } from '../../projections/worker-changes.js';
import { SubsetCache } from './pinned/subset-cache.js';
import { CandidateIndex } from './candidate-index.js';
import { RequirementCache } from './packages.js';

/** Placement's caches for one state: fold that state with this object as the change sink. */
export class PlacementCaches implements WorkerChangeSink {
  /** The candidates in ranking order. */
  readonly candidates = new CandidateIndex();
  /** Package entries already parsed. */
  readonly requirements = new RequirementCache();
  /** Pinned versions' rendezvous subsets, per key and fleet membership. */
  readonly subsets = new SubsetCache();

  /** The fold changed a worker: the candidate index moves it before the next decision. */
  workerChanged(workerId: string): void {
    this.candidates.workerChanged(workerId);
    this.subsets.workerChanged(workerId);
  }
}
