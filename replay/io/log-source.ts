/**
 * Opening a log for replay: an LMDB directory, a JetStream stream (`nats://HOST:PORT[,…]/STREAM`)
 * or a JSONL file, detected by what the path is. All stream their events; none is loaded whole.
 */
import { existsSync, statSync, createReadStream } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import {
  EventLog,
  EventLogError,
  isJetStreamLocation,
  openEventLog,
  readJsonl,
  type ClusterEvent,
  type EventLogBackend,
} from '../../src/events/index.js';
import { ReplayInputError } from './replay-input-error.js';

/** A log to replay. */
export interface LogSource {
  readonly kind: 'lmdb' | 'jetstream' | 'jsonl';
  readonly path: string;
  /** How big it is, for progress: events for LMDB, bytes for JSONL. */
  readonly size: { readonly unit: 'events' | 'bytes'; readonly total: number };
  /**
   * The events with seq >= `fromSeq` (default: all). `onBytes` reports JSONL bytes read so far.
   */
  events(fromSeq?: number, onBytes?: (bytes: number) => void): AsyncIterable<ClusterEvent>;
  /** The seq of the newest `Snapshot` at or before `seq`, when the source indexes them (LMDB, JetStream). */
  snapshotAtOrBefore(seq: number): number | undefined | Promise<number | undefined>;
  /** Releases the source. */
  close(): Promise<void>;
}

/** Opens `path` as an LMDB log directory, a JetStream stream or a JSONL file. */
export async function openLogSource(path: string): Promise<LogSource> {
  if (isJetStreamLocation(path)) return logSource(await openLog(path), 'jetstream');
  if (!existsSync(path)) throw new ReplayInputError(`${path}: no such file or directory`);
  const stat = statSync(path);
  if (stat.isDirectory()) {
    if (!existsSync(join(path, 'events.mdb'))) {
      throw new ReplayInputError(`${path}: a directory, but not an event log (no events.mdb)`);
    }
    return logSource(openLmdb(path), 'lmdb');
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

/** Opens a log (an LMDB directory or a JetStream stream) read-only, for replay. */
export async function openLog(path: string): Promise<EventLogBackend> {
  if (!isJetStreamLocation(path)) return openLmdb(path);
  try {
    return await openEventLog(path, { readOnly: true });
  } catch (error) {
    if (error instanceof EventLogError) throw new ReplayInputError(error.message);
    throw error;
  }
}

function logSource(log: EventLogBackend, kind: 'lmdb' | 'jetstream'): LogSource {
  const first = log.firstSeq ?? 1;
  return {
    kind,
    path: log.location,
    size: { unit: 'events', total: Math.max(0, log.lastSeq - first + 1) },
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
