/**
 * Opening a log for replay: an LMDB directory (the live log's format) or a JSONL file, detected
 * by what the path is. Both stream their events; neither is loaded whole.
 */
import { existsSync, statSync, createReadStream } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { EventLog, readJsonl, type ClusterEvent } from '../../src/events/index.js';
import { ReplayInputError } from './replay-input-error.js';

/** A log to replay. */
export interface LogSource {
  readonly kind: 'lmdb' | 'jsonl';
  readonly path: string;
  /** How big it is, for progress: events for LMDB, bytes for JSONL. */
  readonly size: { readonly unit: 'events' | 'bytes'; readonly total: number };
  /**
   * The events with seq >= `fromSeq` (default: all). `onBytes` reports JSONL bytes read so far.
   */
  events(fromSeq?: number, onBytes?: (bytes: number) => void): AsyncIterable<ClusterEvent>;
  /** The seq of the newest `Snapshot` at or before `seq`, when the source indexes them (LMDB). */
  snapshotAtOrBefore(seq: number): number | undefined;
  /** Releases the source. */
  close(): Promise<void>;
}

/** Opens `path` as an LMDB log directory or a JSONL file. */
export function openLogSource(path: string): LogSource {
  if (!existsSync(path)) throw new ReplayInputError(`${path}: no such file or directory`);
  const stat = statSync(path);
  if (stat.isDirectory()) {
    if (!existsSync(join(path, 'events.mdb'))) {
      throw new ReplayInputError(`${path}: a directory, but not an event log (no events.mdb)`);
    }
    return lmdbSource(path);
  }
  return jsonlSource(path, stat.size);
}

/** Opens an LMDB event log directory read-only. */
export function openLmdb(path: string): EventLog {
  if (!existsSync(join(path, 'events.mdb'))) {
    throw new ReplayInputError(`${path}: not an LMDB event log directory (no events.mdb)`);
  }
  return EventLog.open(path, { readOnly: true });
}

function lmdbSource(path: string): LogSource {
  const log = openLmdb(path);
  const first = log.firstSeq ?? 1;
  return {
    kind: 'lmdb',
    path,
    size: { unit: 'events', total: Math.max(0, log.lastSeq - first + 1) },
    // eslint-disable-next-line @typescript-eslint/require-await
    async *events(fromSeq = 0) {
      yield* log.read(fromSeq);
    },
    snapshotAtOrBefore: (seq) => log.snapshotAtOrBefore(seq),
    close: () => log.close(),
  };
}

function jsonlSource(path: string, bytes: number): LogSource {
  let stream: Readable | undefined;
  return {
    kind: 'jsonl',
    path,
    size: { unit: 'bytes', total: bytes },
    async *events(fromSeq = 0, onBytes) {
      stream = createReadStream(path);
      if (onBytes) {
        let read = 0;
        stream.on('data', (chunk: Buffer) => {
          read += chunk.length;
          onBytes(read);
        });
      }
      for await (const { event } of readJsonl(stream)) {
        if (event.seq >= fromSeq) yield event;
      }
    },
    snapshotAtOrBefore: () => undefined,
    close: () => {
      stream?.destroy();
      return Promise.resolve();
    },
  };
}
