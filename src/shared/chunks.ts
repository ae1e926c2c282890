/**
 * Payloads on the wire: pieces of at most 1 MiB. One limit for every gRPC payload chunk (client
 * to router, router to worker and back): the client cuts at it, the router refuses larger chunks,
 * the worker cuts the executor's result at it.
 */

/** The largest payload chunk the wire contract allows: 1 MiB (1,048,576 bytes). */
export const MAX_CHUNK_BYTES = 1024 * 1024;

/** Slices `payload` into pieces of at most `chunkSize` bytes, in order, without copying; an empty payload has none. */
export function* chunksOf(payload: Buffer, chunkSize = MAX_CHUNK_BYTES): Generator<Buffer> {
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new RangeError(`chunkSize must be a positive integer, not ${chunkSize}`);
  }
  for (let start = 0; start < payload.length; start += chunkSize) {
    yield payload.subarray(start, start + chunkSize);
  }
}
