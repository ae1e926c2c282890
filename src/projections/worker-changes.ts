/**
 * Which workers an event changed, for whoever keeps something derived from the workers (placement's
 * candidate index). The fold tells a sink passed to it (`applyEvent`'s last argument) the ID of every
 * worker it changes, in any field; the sink's owner decides what to recompute. A Snapshot replaces
 * the whole state, workers map included: a new map means start over.
 */

/** Told the ID of every worker a folded event changes (repeats possible). */
export interface WorkerChangeSink {
  workerChanged(workerId: string): void;
}

/** The sink of a fold nobody derives anything from. */
export const IGNORE_CHANGES: WorkerChangeSink = Object.freeze({ workerChanged: () => undefined });
