/** Events in batches: one step of the event loop a batch, not an event, on replay's hot path. */

/** Events a batch holds at most. */
export const BATCH = 4096;

/** The events of batches, one by one. */
export async function* flatten<T>(batches: AsyncIterable<readonly T[]>): AsyncGenerator<T> {
  for await (const batch of batches) yield* batch;
}

/** Events (read synchronously or not) in batches of `BATCH`. */
export async function* inBatches<T>(items: Iterable<T> | AsyncIterable<T>): AsyncGenerator<T[]> {
  let batch: T[] = [];
  for await (const item of items) {
    batch.push(item);
    if (batch.length >= BATCH) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}
