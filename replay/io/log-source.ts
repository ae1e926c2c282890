/**
 * Opening a log for replay: an LMDB directory, a JetStream stream (`nats://HOST:PORT[,…]/STREAM`),
 * a JSONL file, an archive directory or one archive file, detected by what each path is, or
 * several of them at once (an archive and the live log: `replay verify ./archive ./log`), read
 * as one log in seq order (`combined-source.ts`). All stream their events; none is loaded whole.
 */
import { closeSync, createReadStream, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import {
  ARCHIVE_MAGIC,
  ArchiveDirectory,
  EventLog,
  EventLogError,
  isJetStreamLocation,
  openEventLog,
  readJsonl,
  type ClusterEvent,
  type EventLogBackend,
} from '../../src/events/index.js';
import { BATCH, flatten, inBatches } from './batches.js';
import { archiveParts, combinedSource, type SourcePart } from './combined-source.js';
import type { LogSource, OpenOptions } from './source.js';

export type { LogSource, OpenOptions } from './source.js';
import { ReplayInputError } from './replay-input-error.js';

/**
 * Opens `paths` as one log: each an LMDB log directory, a JetStream stream, a JSONL file, an
 * archive directory or an archive file; archives of one log with at most one live log (or file).
 */
export async function openLogSource(
  paths: string | readonly string[],
  options: OpenOptions = {},
): Promise<LogSource> {
  const list = typeof paths === 'string' ? [paths] : paths;
  if (list.length === 0) throw new ReplayInputError('no log given');
  const parts: SourcePart[] = [];
  try {
    for (const path of list) parts.push(...(await openPart(path, options)));
  } catch (error) {
    await Promise.all(parts.map((part) => part.close()));
    throw error;
  }
  const lives = parts.filter((part) => part.kind !== 'archive');
  if (lives.length > 1) {
    await Promise.all(parts.map((part) => part.close()));
    throw new ReplayInputError(
      `${lives.map((part) => part.path).join(', ')}: give one live log (or JSONL file) at a time, with any archives of it`,
    );
  }
  if (parts.length === 1 && parts[0]?.kind !== 'archive') return (parts[0] as SourcePart).source;
  return combinedSource(list.join(' '), parts, options);
}

async function openPart(path: string, options: OpenOptions): Promise<SourcePart[]> {
  if (isJetStreamLocation(path)) return [livePart(await openLog(path), 'jetstream')];
  if (!existsSync(path)) throw new ReplayInputError(`${path}: no such file or directory`);
  const stat = statSync(path);
  if (stat.isDirectory()) {
    if (existsSync(join(path, 'events.mdb'))) return [livePart(openLmdb(path), 'lmdb')];
    if (ArchiveDirectory.holdsArchive(path)) return archiveParts(path, options);
    throw new ReplayInputError(
      `${path}: a directory, but not an event log (no events.mdb) nor an archive (no events-<from>-<to>.archive files)`,
    );
  }
  if (isArchiveFile(path)) return archiveParts(path, options);
  const source = jsonlSource(path, stat.size);
  return [
    {
      kind: 'jsonl',
      path,
      source,
      range: undefined,
      firstSeq: firstSeqOf(path),
      origin: undefined,
      close: () => source.close(),
    },
  ];
}

/** The seq of a JSONL file's first event (its first line read alone), when it has one. */
function firstSeqOf(path: string): number | undefined {
  const fd = openSync(path, 'r');
  try {
    const chunks: Buffer[] = [];
    const chunk = Buffer.alloc(64 * 1024);
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, null);
      const end = chunk.subarray(0, read).indexOf(0x0a);
      chunks.push(Buffer.from(chunk.subarray(0, end < 0 ? read : end)));
      if (end >= 0 || read === 0) break;
    }
    const first: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const seq = (first as { seq?: unknown } | null)?.seq;
    return typeof seq === 'number' ? seq : undefined;
  } catch {
    // Not a JSON line: reading the file says what is wrong with it.
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Whether `path` is an archive file (its first line says so). */
function isArchiveFile(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(ARCHIVE_MAGIC.length + 1);
    const read = readSync(fd, head, 0, head.length, 0);
    return head.toString('utf8', 0, read) === `${ARCHIVE_MAGIC}\n`;
  } finally {
    closeSync(fd);
  }
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

/** A live log as a part: its events, its range, its origin. */
function livePart(log: EventLogBackend, kind: 'lmdb' | 'jetstream'): SourcePart {
  const first = log.firstSeq;
  const source: LogSource = {
    kind,
    path: log.location,
    size: { unit: 'events', total: Math.max(0, log.lastSeq - (first ?? 1) + 1) },
    range: first === undefined ? undefined : { first, last: log.lastSeq },
    events(fromSeq = 0, onBytes, skipSnapshots = false) {
      return flatten(this.batches(fromSeq, onBytes, skipSnapshots));
    },
    batches(fromSeq = 0, _onBytes, skipSnapshots = false) {
      return inBatches(log.read(fromSeq, Number.MAX_SAFE_INTEGER, { skipSnapshots }));
    },
    async *stored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER) {
      yield* log.readStored(fromSeq, toSeq);
    },
    snapshotAtOrBefore: (seq) => log.snapshotAtOrBefore(seq),
    locate: () => Promise.resolve(0),
    close: () => log.close(),
  };
  return {
    kind,
    path: log.location,
    source,
    range: source.range,
    origin: () => Promise.resolve(log.origin()),
    startsAtSnapshot: async () =>
      first !== undefined && (await log.snapshotAtOrBefore(first)) === first,
    close: () => log.close(),
  };
}

function jsonlSource(path: string, bytes: number): LogSource {
  let stream: Readable | undefined;
  return {
    kind: 'jsonl',
    path,
    size: { unit: 'bytes', total: bytes },
    range: undefined,
    events(fromSeq = 0, onBytes) {
      return flatten(this.batches(fromSeq, onBytes));
    },
    async *batches(fromSeq = 0, onBytes) {
      stream = createReadStream(path);
      if (onBytes) {
        let read = 0;
        stream.on('data', (chunk: Buffer) => {
          read += chunk.length;
          onBytes(read);
        });
      }
      let batch: ClusterEvent[] = [];
      for await (const { event } of readJsonl(stream)) {
        if (event.seq < fromSeq) continue;
        batch.push(event);
        if (batch.length >= BATCH) {
          yield batch;
          batch = [];
        }
      }
      if (batch.length > 0) yield batch;
    },
    async *stored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER) {
      for await (const stored of readJsonl(path)) {
        if (stored.event.seq > toSeq) return;
        if (stored.event.seq >= fromSeq) yield stored;
      }
    },
    snapshotAtOrBefore: () => undefined,
    locate: () => Promise.resolve(0),
    close: () => {
      stream?.destroy();
      return Promise.resolve();
    },
  };
}
