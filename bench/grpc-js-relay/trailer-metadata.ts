/** The call's trailers (`core/calls/answer-trailers.ts`) as grpc-js metadata. */
import { Metadata } from '@grpc/grpc-js';
import type { TrailerEntry } from '../../src/core/calls/answer-trailers.js';

/** grpc-js metadata holding `entries` (bytes only under `-bin` keys, as gRPC requires). */
export function trailerMetadata(entries: readonly TrailerEntry[]): Metadata {
  const metadata = new Metadata();
  for (const { key, value } of entries) {
    metadata.set(key, typeof value === 'string' ? value : Buffer.from(value));
  }
  return metadata;
}
