/**
 * Several sources read as one log: the files of a log's archive (each starting at a snapshot or at
 * the log's first event) and its live log, in seq order, each seq once where they overlap (a
 * JetStream stream keeps what it archived until its limits drop it). They must be one log's (the
 * same origin); a seq range no file holds, or a damaged file, is refused naming it, or with
 * `--skip-damaged` reported on stderr and passed over (the next file starts at a snapshot, so
 * the replay goes on from there).
 */
import { basename } from 'node:path';
import {
  ArchiveDirectory,
  ArchiveFile,
  DamagedArchiveError,
  describeOrigin,
  parseArchiveFileName,
  readArchiveHeader,
  sameOrigin,
  type ArchiveHeader,
  type ClusterEvent,
  type LogOrigin,
  type StoredEvent,
} from '../../src/events/index.js';
import { flatten, inBatches } from './batches.js';
import type { LogSource, OpenOptions } from './source.js';
import { ReplayInputError } from './replay-input-error.js';

/** One source among several: a live log, a JSONL file, or one archive file. */
export interface SourcePart {
  readonly kind: LogSource['kind'];
  readonly path: string;
  readonly source: LogSource;
  readonly range: { readonly first: number; readonly last: number } | undefined;
  /** Which log it is from, when it says. */
  readonly origin: (() => Promise<LogOrigin | undefined>) | undefined;
  /**
   * The seq of its first event where it has no `range` (a JSONL file: its first line's), for
   * reading the parts in seq order; undefined when that cannot be told.
   */
  readonly firstSeq?: number;
  /**
   * Whether its first event is a `Snapshot` (an archive file's header says so): a fold that read
   * the part before it up to that seq passes it over, as it does the snapshots inside a part.
   */
  readonly startsAtSnapshot?: () => Promise<boolean>;
  close(): Promise<void>;
}

/** The files of an archive directory (or one archive file) as parts, each read when needed. */
export async function archiveParts(path: string, options: OpenOptions): Promise<SourcePart[]> {
  const files = ArchiveDirectory.holdsArchive(path)
    ? ArchiveDirectory.open(path).entries()
    : [{ path, file: path, ...rangeOf(path) }];
  const parts: SourcePart[] = [];
  for (const entry of files) {
    let header: ArchiveHeader;
    try {
      header = await readArchiveHeader(entry.path, entry.file);
    } catch (error) {
      if (!(error instanceof DamagedArchiveError) || !options.skipDamaged) throw error;
      warn(options, `skipping ${error.message}`);
      continue;
    }
    parts.push(archivePart(entry.path, entry.file, entry, header, options));
  }
  return parts;
}

function rangeOf(path: string): { fromSeq: number; toSeq: number } {
  const range = parseArchiveFileName(basename(path));
  if (!range)
    throw new ReplayInputError(`${path}: an archive file is named events-<from>-<to>.archive`);
  return range;
}

function warn(options: OpenOptions, line: string): void {
  (options.warn ?? ((text: string) => process.stderr.write(`replay: ${text}\n`)))(line);
}

/** One archive file as a part: opened (and its checksum checked) when its events are read. */
function archivePart(
  path: string,
  name: string,
  range: { fromSeq: number; toSeq: number },
  header: ArchiveHeader,
  options: OpenOptions,
): SourcePart {
  const { origin } = header;
  const stored = async function* (
    fromSeq = 0,
    toSeq = Number.MAX_SAFE_INTEGER,
    skipSnapshots = false,
  ) {
    let file: ArchiveFile;
    try {
      file = await ArchiveFile.open(path, name);
    } catch (error) {
      if (!(error instanceof DamagedArchiveError) || !options.skipDamaged) throw error;
      warn(options, `skipping ${error.message}`);
      return;
    }
    yield* file.readStored(fromSeq, toSeq, { skipSnapshots });
  };
  const source: LogSource = {
    kind: 'archive',
    path,
    size: { unit: 'events', total: range.toSeq - range.fromSeq + 1 },
    range: { first: range.fromSeq, last: range.toSeq },
    events(fromSeq = 0, onBytes, skipSnapshots = false) {
      return flatten(this.batches(fromSeq, onBytes, skipSnapshots));
    },
    async *batches(fromSeq = 0, _onBytes, skipSnapshots = false) {
      let file: ArchiveFile;
      try {
        file = await ArchiveFile.open(path, name);
      } catch (error) {
        if (!(error instanceof DamagedArchiveError) || !options.skipDamaged) throw error;
        warn(options, `skipping ${error.message}`);
        return;
      }
      for await (const batch of file.readBlocks(fromSeq, Number.MAX_SAFE_INTEGER, {
        skipSnapshots,
      })) {
        yield batch.map((stored) => stored.event);
      }
    },
    stored: (fromSeq, toSeq) => stored(fromSeq, toSeq),
    snapshotAtOrBefore: (seq) => {
      if (seq < range.fromSeq) return undefined;
      return [range.fromSeq, ...header.snapshots].filter((at) => at <= seq).at(-1);
    },
    async locate(requestId) {
      try {
        return (await (await ArchiveFile.open(path, name)).holds(Buffer.from(requestId)))
          ? range.fromSeq
          : -1;
      } catch (error) {
        if (error instanceof DamagedArchiveError && options.skipDamaged) return -1;
        throw error;
      }
    },
    close: () => Promise.resolve(),
  };
  return {
    kind: 'archive',
    path,
    source,
    range: source.range,
    origin: () => Promise.resolve(origin),
    startsAtSnapshot: () => Promise.resolve(header.snapshots[0] === range.fromSeq),
    close: () => source.close(),
  };
}

/** The parts as one log (checked to be one log's), in seq order. */
export async function combinedSource(
  name: string,
  parts: readonly SourcePart[],
  options: OpenOptions,
): Promise<LogSource> {
  await checkOneLog(parts);
  // In the order of their first seqs (a live log that starts before an archive file is read
  // first, and the file's seqs it holds too are not read again); where two start together, the
  // archive file first. A part whose first seq cannot be told comes last.
  const firstOf = (part: SourcePart) =>
    part.range?.first ?? part.firstSeq ?? Number.MAX_SAFE_INTEGER;
  const ordered = [...parts].sort((a, b) => {
    const byFirst = firstOf(a) - firstOf(b);
    if (byFirst !== 0) return byFirst;
    if (a.kind === 'archive' && b.kind !== 'archive') return -1;
    if (b.kind === 'archive' && a.kind !== 'archive') return 1;
    return 0;
  });
  const live = ordered.find((part) => part.kind !== 'archive');
  const firsts = ordered.flatMap((part) => (part.range ? [part.range.first] : []));
  const lasts = ordered.flatMap((part) => (part.range ? [part.range.last] : []));
  const total = ordered.reduce((sum, part) => sum + part.source.size.total, 0);
  const onGap = (from: number, to: number) => {
    if (!options.skipDamaged) {
      throw new ReplayInputError(
        `no file given holds seq ${from} to ${to} (an archive file missing or deleted?): give it, or pass --skip-damaged to go on from the next snapshot`,
      );
    }
    // Missing, or given but damaged (and reported so, by name, as it was passed over).
    warn(options, `skipping seq ${from} to ${to}: no undamaged file given holds them`);
  };
  /**
   * Each part's batches from `fromSeq`, each seq once, gaps reported. `skipSnapshots`: the reader
   * folds every event, so a part that starts at a snapshot right after the events read before it
   * starts after that snapshot (its state is the fold's already).
   */
  async function* walk<T>(
    fromSeq: number,
    toSeq: number,
    read: (part: SourcePart, from: number) => AsyncIterable<readonly T[]>,
    seqOf: (item: T) => number,
    skipSnapshots = false,
  ): AsyncGenerator<T[]> {
    let next: number | undefined;
    for (const part of ordered) {
      // Where this part is read from: after its first event when that is a snapshot of what was
      // read before it. `next` moves only once the part gives an event, so a part that gives
      // none (a damaged file passed over) leaves the gap at its first seq, and the next part's
      // snapshot is not passed over.
      const passOver =
        skipSnapshots &&
        next !== undefined &&
        next === part.range?.first &&
        next < toSeq &&
        (await part.startsAtSnapshot?.()) === true;
      const expected = next === undefined ? undefined : next + (passOver ? 1 : 0);
      const from = Math.max(fromSeq, expected ?? 0);
      if (part.range && (part.range.last < from || part.range.first > toSeq)) continue;
      let first = true;
      for await (const batch of read(part, from)) {
        const out: T[] = [];
        for (const item of batch) {
          const seq = seqOf(item);
          if (seq > toSeq) break;
          const after = first ? expected : next;
          if (after !== undefined && seq < after) continue;
          // Within a part seqs run on (a snapshot passed over is no gap); between parts they must.
          if (first && next !== undefined && after !== undefined && seq > after) {
            onGap(next, seq - 1);
          }
          first = false;
          next = seq + 1;
          out.push(item);
        }
        if (out.length > 0) yield out;
        if (next !== undefined && next > toSeq) return;
      }
    }
  }
  const combined: LogSource = {
    kind: live?.kind ?? 'archive',
    path: name,
    size: { unit: live?.kind === 'jsonl' ? 'bytes' : 'events', total },
    range:
      firsts.length === 0 ? undefined : { first: Math.min(...firsts), last: Math.max(...lasts) },
    events(fromSeq = 0, onBytes, skipSnapshots) {
      return flatten(combined.batches(fromSeq, onBytes, skipSnapshots));
    },
    batches(fromSeq = 0, onBytes, skipSnapshots) {
      return walk<ClusterEvent>(
        fromSeq,
        Number.MAX_SAFE_INTEGER,
        (part, from) => part.source.batches(from, onBytes, skipSnapshots),
        (event) => event.seq,
        skipSnapshots,
      );
    },
    stored(fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER) {
      return flatten(
        walk<StoredEvent>(
          fromSeq,
          toSeq,
          (part, from) => inBatches(part.source.stored(from, toSeq)),
          (stored) => stored.event.seq,
        ),
      );
    },
    async snapshotAtOrBefore(seq) {
      for (const part of [...ordered].reverse()) {
        if (!part.range || part.range.first > seq) continue;
        const at = await part.source.snapshotAtOrBefore(seq);
        return at ?? part.range.first;
      }
      return undefined;
    },
    async locate(requestId) {
      // The first archive file read before the live log that names it; else the live log's
      // start (it holds every seq after it, the later files' too).
      for (const part of ordered) {
        if (part.kind !== 'archive') break;
        const at = await part.source.locate(requestId);
        if (at >= 0) return at;
      }
      return live?.range?.first ?? live?.firstSeq ?? 0;
    },
    close: async () => {
      await Promise.all(parts.map((part) => part.close()));
    },
  };
  return combined;
}

/** Refuses parts from more than one log: every origin they name must be the same. */
async function checkOneLog(parts: readonly SourcePart[]): Promise<void> {
  let first: { origin: LogOrigin; path: string } | undefined;
  for (const part of parts) {
    const origin = await part.origin?.();
    if (origin === undefined) continue;
    if (first === undefined) first = { origin, path: part.path };
    else if (!sameOrigin(first.origin, origin)) {
      throw new ReplayInputError(
        `${part.path} is another log's (${describeOrigin(origin)}) than ${first.path} (${describeOrigin(first.origin)}): give the archive of the log you replay`,
      );
    }
  }
}
