/**
 * Writing and reading one archive file (`archive-format.ts`). Writing is crash safe: the file is
 * written under a hidden temporary name, synced, read back and checked block by block against
 * what was meant (`verified`), and only then renamed to its name (and the directory synced), so a
 * file with an archive's name is always a whole, verified one. Reading checks the body's SHA-256
 * before decoding anything, then validates every event as every reader does.
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { promisify } from 'node:util';
import { brotliCompress, brotliDecompress, constants } from 'node:zlib';
import { ByteReader, ByteWriter } from '../codec/byte-buffers.js';
import {
  decodeBlockEvent,
  DecodeContext,
  EncodeContext,
  encodeBlockEvent,
} from '../codec/stored-codec.js';
import { EventLogError, InvalidEventError } from '../errors.js';
import type { LogOrigin } from '../event-log.js';
import type { StoredEvent } from '../types.js';
import {
  ARCHIVE_CODEC,
  ARCHIVE_CODECS,
  ARCHIVE_COMPRESSION,
  ARCHIVE_MAGIC,
  archiveFileName,
  DamagedArchiveError,
  parseArchiveFileName,
  parseArchiveHeader,
  type ArchiveBlock,
  type ArchiveHeader,
} from './archive-format.js';

const compress = promisify(brotliCompress);
const decompress = promisify(brotliDecompress);

/** Raw bytes a block holds at most before the next event starts a new one. */
const BLOCK_BYTES = 256 * 1024;
/** The largest output chunk a block is decompressed in (a block's raw size, up to this). */
const MAX_CHUNK = 1024 * 1024;
/** Events a reader decodes at a time (one turn of the event loop a slice). */
const SLICE = 1024;
/** Brotli's quality: 5 compresses these blocks about as small as 9 at a fifth of its cost. */
const QUALITY = 5;

/** The steps of writing a file, in order (a crash test stops the writer at each). */
export type ArchiveWriteStep = 'written' | 'synced' | 'verified' | 'renamed';

/** A file written and renamed to its name. */
export interface WrittenArchive {
  readonly path: string;
  readonly file: string;
  readonly header: ArchiveHeader;
  /** The whole file's size and SHA-256 (what `sha256sum` prints). */
  readonly bytes: number;
  readonly sha256: string;
}

/** Gathers one file's events (a run of whole segments), then writes it. */
export class ArchiveWriter {
  private readonly blocks: { firstSeq: number; events: number; raw: Buffer }[] = [];
  private block = new ByteWriter(BLOCK_BYTES + 4096);
  private context = new EncodeContext();
  private blockFirst = 0;
  private blockEvents = 0;
  private first: StoredEvent | undefined;
  private last: StoredEvent | undefined;
  private raw = 0;
  private readonly rules = new Set<number>();
  private readonly schemas = new Set<number>();
  private readonly snapshots: number[] = [];

  constructor(private readonly origin: LogOrigin) {}

  /** Events added so far. */
  get events(): number {
    return this.last === undefined || this.first === undefined
      ? 0
      : this.last.event.seq - this.first.event.seq + 1;
  }

  /** Raw (encoded, uncompressed) bytes added so far. */
  get rawBytes(): number {
    return this.raw + this.block.length;
  }

  /** The last seq added. */
  get lastSeq(): number | undefined {
    return this.last?.event.seq;
  }

  /** Adds the next event; seqs must run on, and the first must be a snapshot or the log's start. */
  add(stored: StoredEvent): void {
    const { event } = stored;
    if (this.last === undefined) {
      if (event.type !== 'Snapshot' && event.seq !== this.origin.seq) {
        throw new EventLogError(
          `an archive file starts at a snapshot or at the log's first event, not at seq ${event.seq} (${event.type})`,
        );
      }
      this.first = stored;
    } else if (event.seq !== this.last.event.seq + 1) {
      throw new EventLogError(`archive: seq ${event.seq} does not follow ${this.last.event.seq}`);
    }
    if (event.type === 'Snapshot') {
      this.snapshots.push(event.seq);
      const version = (event.state as { rulesVersion?: unknown }).rulesVersion;
      if (typeof version === 'number') this.rules.add(version);
      this.schemas.add(event.schemaVersion ?? 1);
    }
    if (event.type === 'RouterStarted') {
      this.rules.add(event.rulesVersion ?? 1);
      // A router that records no schema version wrote v1 (upcast.ts).
      this.schemas.add(event.schemaVersion ?? 1);
    }
    if (this.blockEvents === 0) this.blockFirst = event.seq;
    encodeBlockEvent(stored, this.block, this.context, 'canonical');
    this.blockEvents += 1;
    this.last = stored;
    if (this.block.length >= BLOCK_BYTES) this.sealBlock();
  }

  /**
   * Writes the file into `dir`: under a temporary name, synced, read back and compared with its
   * blocks, then renamed and the directory synced. `onStep` hears each step done (and may stop the
   * process there: the crash tests do).
   */
  async write(dir: string, onStep?: (step: ArchiveWriteStep) => void): Promise<WrittenArchive> {
    const first = this.first?.event;
    const last = this.last?.event;
    if (first === undefined || last === undefined) throw new EventLogError('archive: no events');
    this.sealBlock();
    const bodies = await Promise.all(
      this.blocks.map((block) =>
        compress(block.raw, {
          params: {
            [constants.BROTLI_PARAM_QUALITY]: QUALITY,
            [constants.BROTLI_PARAM_SIZE_HINT]: block.raw.length,
          },
        }),
      ),
    );
    const body = Buffer.concat(bodies);
    const header: ArchiveHeader = {
      format: 1,
      origin: this.origin,
      fromSeq: first.seq,
      toSeq: last.seq,
      events: last.seq - first.seq + 1,
      firstAt: first.at,
      lastAt: last.at,
      schemaVersions: this.schemas.size > 0 ? [...this.schemas].sort((a, b) => a - b) : [1],
      rulesVersions: [...this.rules].sort((a, b) => a - b),
      snapshots: [...this.snapshots],
      codec: ARCHIVE_CODEC,
      compression: ARCHIVE_COMPRESSION,
      blocks: this.blocks.map((block, i): ArchiveBlock => ({
        firstSeq: block.firstSeq,
        events: block.events,
        bytes: (bodies[i] as Buffer).length,
        rawBytes: block.raw.length,
      })),
      bodyBytes: body.length,
      bodySha256: sha256(body),
    };
    const content = Buffer.concat([
      Buffer.from(`${ARCHIVE_MAGIC}\n${JSON.stringify(header)}\n`),
      body,
    ]);
    const file = archiveFileName(header.fromSeq, header.toSeq);
    const path = join(dir, file);
    const temporary = join(dir, `.${file}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      const handle = await open(temporary, 'wx', 0o600);
      try {
        await handle.writeFile(content);
        onStep?.('written');
        await handle.sync();
      } finally {
        await handle.close();
      }
      onStep?.('synced');
      await this.verify(temporary, file, header);
      onStep?.('verified');
      await rename(temporary, path);
      await syncDirectory(dir);
      onStep?.('renamed');
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    return { path, file, header, bytes: content.length, sha256: sha256(content) };
  }

  /** Reads the file back and checks its checksum and every block against what was meant. */
  private async verify(path: string, file: string, header: ArchiveHeader): Promise<void> {
    const archive = await ArchiveFile.open(path, file);
    for (const [i, block] of this.blocks.entries()) {
      const back = await archive.rawBlock(i);
      if (!back.equals(block.raw)) {
        throw new DamagedArchiveError(
          file,
          header.fromSeq,
          header.toSeq,
          `block ${i} did not read back as written`,
        );
      }
    }
  }

  private sealBlock(): void {
    if (this.blockEvents === 0) return;
    this.raw += this.block.length;
    this.blocks.push({
      firstSeq: this.blockFirst,
      events: this.blockEvents,
      raw: this.block.bytes(),
    });
    this.block = new ByteWriter(BLOCK_BYTES + 4096);
    this.context = new EncodeContext();
    this.blockEvents = 0;
  }
}

/** An archive file read whole and checked: its header, then its events on demand. */
export class ArchiveFile {
  private constructor(
    readonly path: string,
    readonly file: string,
    readonly header: ArchiveHeader,
    private readonly body: Buffer,
    private readonly offsets: readonly number[],
  ) {}

  /**
   * Reads the file at `path` and checks its name, header and body checksum; a file that fails is a
   * `DamagedArchiveError` naming it and its seq range. `name` is its name as an archive file
   * (default: its base name; a file still under its temporary name is checked as what it will be).
   */
  static async open(path: string, name = basename(path)): Promise<ArchiveFile> {
    const range = parseArchiveFileName(basename(name));
    if (!range) {
      throw new EventLogError(
        `${name}: not an archive file (its name is not events-<from>-<to>.archive)`,
      );
    }
    const damaged = (problem: string) =>
      new DamagedArchiveError(name, range.fromSeq, range.toSeq, problem);
    const content = await readFile(path).catch((error: NodeJS.ErrnoException) => {
      throw damaged(`it cannot be read (${error.code ?? error.message})`);
    });
    const magicEnd = content.indexOf(0x0a);
    if (magicEnd < 0 || content.toString('utf8', 0, magicEnd) !== ARCHIVE_MAGIC) {
      throw damaged(`it does not start with "${ARCHIVE_MAGIC}"`);
    }
    const headerEnd = content.indexOf(0x0a, magicEnd + 1);
    if (headerEnd < 0) throw damaged('it ends inside its header');
    const header = parseArchiveHeader(
      name,
      range,
      content.toString('utf8', magicEnd + 1, headerEnd),
    );
    const body = content.subarray(headerEnd + 1);
    if (body.length !== header.bodyBytes) {
      throw damaged(
        `its body has ${body.length} bytes, its header says ${header.bodyBytes} (truncated?)`,
      );
    }
    if (sha256(body) !== header.bodySha256) throw damaged('its body fails its SHA-256');
    const offsets: number[] = [];
    let offset = 0;
    for (const block of header.blocks) {
      offsets.push(offset);
      offset += block.bytes;
    }
    return new ArchiveFile(path, name, header, body, offsets);
  }

  /** Block `index` decompressed. */
  async rawBlock(index: number): Promise<Buffer> {
    const block = this.header.blocks[index];
    const offset = this.offsets[index];
    if (block === undefined || offset === undefined) throw new RangeError(`no block ${index}`);
    try {
      // In one chunk: at the default 16 KiB each chunk is a trip to the thread pool and back,
      // which waits for the next turn of the event loop (a slice each, see `readBlocks`). Never
      // past its recorded size: a block that inflates further is refused as it grows.
      const raw = await decompress(this.body.subarray(offset, offset + block.bytes), {
        chunkSize: Math.min(Math.max(block.rawBytes, 64), MAX_CHUNK),
        maxOutputLength: Math.max(block.rawBytes, 1),
      });
      if (raw.length !== block.rawBytes) throw new Error(`${raw.length} bytes`);
      return raw;
    } catch (error) {
      throw new DamagedArchiveError(
        this.file,
        this.header.fromSeq,
        this.header.toSeq,
        (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE'
          ? `block ${index} inflates past the ${block.rawBytes} bytes its header records`
          : `block ${index} does not decompress (${(error as Error).message})`,
      );
    }
  }

  /**
   * The events with `fromSeq <= seq <= toSeq`, validated, in order; the next block decompresses
   * (on the thread pool) while one is decoded. `skipSnapshots`: pass over every `Snapshot` after
   * the first event read, undecoded (a reader folding every event has their state already).
   */
  async *readStored(
    fromSeq = 0,
    toSeq = Number.MAX_SAFE_INTEGER,
    options: { skipSnapshots?: boolean } = {},
  ): AsyncGenerator<StoredEvent> {
    for await (const batch of this.readBlocks(fromSeq, toSeq, options)) yield* batch;
  }

  /**
   * The same, a slice of a block's events at a time, the next block read ahead: each slice ends
   * with a turn of the event loop, in which the thread pool's work on the next block is taken
   * up (without the turns, it began only when this block was done and waited for).
   */
  async *readBlocks(
    fromSeq = 0,
    toSeq = Number.MAX_SAFE_INTEGER,
    { skipSnapshots = false }: { skipSnapshots?: boolean } = {},
  ): AsyncGenerator<StoredEvent[]> {
    const { blocks } = this.header;
    const wanted = blocks
      .map((block, index) => ({ block, index }))
      .filter(({ block }) => block.firstSeq + block.events > fromSeq && block.firstSeq <= toSeq);
    let next = wanted[0] ? this.rawBlock(wanted[0].index) : undefined;
    let skip = false;
    for (const [i, { block }] of wanted.entries()) {
      const raw = await (next as Promise<Buffer>);
      const following = wanted[i + 1];
      next = following ? this.rawBlock(following.index) : undefined;
      // A block read ahead that fails is reported when its turn comes, not as an unhandled one.
      next?.catch(() => undefined);
      for (const batch of this.decodeBlock(raw, block, fromSeq, toSeq, skipSnapshots, skip)) {
        skip = true;
        yield batch;
        await yieldTurn();
      }
    }
  }

  /** Whether any block holds these bytes (a request ID's first mention is spelled out in it). */
  async holds(bytes: Buffer): Promise<boolean> {
    for (let i = 0; i < this.header.blocks.length; i += 1) {
      if ((await this.rawBlock(i)).includes(bytes)) return true;
    }
    return false;
  }

  /**
   * A block's events in the range, `SLICE` at a time, each slice decoded when the one before it
   * has been taken (a block holds about 9,000 events: decoded at once they would all outlive
   * the young generation of the heap, to be copied and promoted); with `skipSnapshots`, every
   * `Snapshot` after the first event taken is passed over (`taken`: an event was taken before
   * this block).
   */
  private *decodeBlock(
    raw: Buffer,
    block: ArchiveBlock,
    fromSeq: number,
    toSeq: number,
    skipSnapshots: boolean,
    taken: boolean,
  ): Generator<StoredEvent[]> {
    const reader = new ByteReader(raw);
    const context = new DecodeContext(undefined, ARCHIVE_CODECS[this.header.codec]);
    const end = block.firstSeq + block.events - 1;
    let out: StoredEvent[] = [];
    let skip = skipSnapshots && taken;
    for (let seq = block.firstSeq; seq <= end; seq += 1) {
      let stored: StoredEvent | undefined;
      try {
        // Events before the range are decoded all the same: they share the block's strings.
        const wanted = seq >= fromSeq && seq <= toSeq;
        stored = decodeBlockEvent(reader, seq, context, !wanted || skip);
        if (!wanted) continue;
      } catch (error) {
        if (error instanceof InvalidEventError) throw this.damaged(error.message);
        throw error;
      }
      if (stored !== undefined) {
        out.push(stored);
        skip = skipSnapshots;
        if (out.length >= SLICE) {
          yield out;
          out = [];
        }
      }
    }
    if (!reader.done) throw this.damaged(`bytes follow seq ${end} in its block`);
    if (out.length > 0) yield out;
  }

  private damaged(problem: string): DamagedArchiveError {
    return new DamagedArchiveError(this.file, this.header.fromSeq, this.header.toSeq, problem);
  }
}

/** The header of the file at `path`, read from its first lines alone. */
export async function readArchiveHeader(
  path: string,
  name = basename(path),
): Promise<ArchiveHeader> {
  const range = parseArchiveFileName(basename(path));
  if (!range) throw new EventLogError(`${name}: not an archive file`);
  const damaged = (problem: string) =>
    new DamagedArchiveError(name, range.fromSeq, range.toSeq, problem);
  const handle = await open(path, 'r').catch((error: NodeJS.ErrnoException) => {
    throw damaged(`it cannot be read (${error.code ?? error.message})`);
  });
  try {
    let text = '';
    const chunk = Buffer.alloc(16 * 1024);
    for (let position = 0; position < 16 * 1024 * 1024; position += chunk.length) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      text += chunk.toString('latin1', 0, bytesRead);
      const lines = text.split('\n');
      if (lines.length >= 3 || bytesRead === 0) {
        if (lines[0] !== ARCHIVE_MAGIC) throw damaged(`it does not start with "${ARCHIVE_MAGIC}"`);
        if (lines.length < 3) throw damaged('it ends inside its header');
        return parseArchiveHeader(name, range, Buffer.from(lines[1] ?? '', 'latin1').toString());
      }
    }
    throw damaged('its header is longer than 16 MiB');
  } finally {
    await handle.close();
  }
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Makes a rename in `dir` durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
