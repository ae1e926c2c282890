/**
 * The archive file format: what one file of a log's archive holds and how it is named. A file is
 * self-describing: a first line `READIE-ARCHIVE 1`, a second line of JSON (its header: which log,
 * the seq range and instants it holds, the schema and placement rules versions in it, how its
 * body is encoded, its snapshots' seqs, each block's size and the body's SHA-256), then the body: blocks of events in
 * the binary codec (`codec/stored-codec.ts`), each compressed with brotli on its own. Its name
 * repeats its seq range (`events-<from>-<to>.archive`, 16 digits each, so names sort by seq),
 * which a damaged file can still be reported by.
 */
import {
  isValueFormatName,
  NEWEST_VALUE_FORMAT_NAME,
  VALUE_FORMAT_NAMES,
  type ValueFormatName,
} from '../codec/field-codecs.js';
import { EventLogError } from '../errors.js';
import type { LogOrigin } from '../event-log.js';
import { EVENT_SCHEMA_VERSION } from '../schema.js';

/** The first line of every archive file. */
export const ARCHIVE_MAGIC = 'READIE-ARCHIVE 1';
/**
 * How an archive's events are encoded: the binary codec's value format by its name
 * (`codec/field-codecs.ts`). Files are written in the newest; a file of an older format is read
 * by its layout.
 */
export const ARCHIVE_CODECS = VALUE_FORMAT_NAMES;
/** An archive's codec name. */
export type ArchiveCodec = ValueFormatName;
/** The codec new archive files are written in. */
export const ARCHIVE_CODEC: ArchiveCodec = NEWEST_VALUE_FORMAT_NAME;
/** How an archive's blocks are compressed. */
export const ARCHIVE_COMPRESSION = 'brotli';

/** One block of a file's body. */
export interface ArchiveBlock {
  /** The seq of its first event. */
  readonly firstSeq: number;
  readonly events: number;
  /** Its compressed bytes, as stored. */
  readonly bytes: number;
  /** Its bytes once decompressed. */
  readonly rawBytes: number;
}

/** An archive file's header. */
export interface ArchiveHeader {
  readonly format: 1;
  /** The log the events are from. */
  readonly origin: LogOrigin;
  readonly fromSeq: number;
  readonly toSeq: number;
  readonly events: number;
  readonly firstAt: string;
  readonly lastAt: string;
  /**
   * The event schema versions its events are written in (those its snapshots and router starts
   * record; a reader upcasts the older ones, `upcast.ts`).
   */
  readonly schemaVersions: readonly number[];
  /** The placement rules versions in force over the events (from the snapshot and starts in it). */
  readonly rulesVersions: readonly number[];
  /** The seqs of the `Snapshot` events it holds: where a replay of a part of it may start. */
  readonly snapshots: readonly number[];
  readonly codec: ArchiveCodec;
  readonly compression: typeof ARCHIVE_COMPRESSION;
  readonly blocks: readonly ArchiveBlock[];
  readonly bodyBytes: number;
  readonly bodySha256: string;
}

/** An archive file that cannot be read back as what it says: named, with its seq range. */
export class DamagedArchiveError extends EventLogError {
  override readonly name = 'DamagedArchiveError';

  constructor(
    readonly file: string,
    readonly fromSeq: number,
    readonly toSeq: number,
    problem: string,
  ) {
    super(`archive file ${file} (seq ${fromSeq} to ${toSeq}) is damaged: ${problem}`);
  }
}

const NAME = /^events-(\d{16})-(\d{16})\.archive$/;

/** The name of the file holding seq `fromSeq` to `toSeq`. */
export function archiveFileName(fromSeq: number, toSeq: number): string {
  return `events-${String(fromSeq).padStart(16, '0')}-${String(toSeq).padStart(16, '0')}.archive`;
}

/** The seq range an archive file's name says it holds; undefined for any other name. */
export function parseArchiveFileName(name: string): { fromSeq: number; toSeq: number } | undefined {
  const match = NAME.exec(name);
  if (!match) return undefined;
  const fromSeq = Number(match[1]);
  const toSeq = Number(match[2]);
  return toSeq >= fromSeq ? { fromSeq, toSeq } : undefined;
}

/**
 * The header a file's second line holds, checked against what its name says; throws a
 * `DamagedArchiveError` for anything else.
 */
export function parseArchiveHeader(
  file: string,
  range: { fromSeq: number; toSeq: number },
  line: string,
): ArchiveHeader {
  const damaged = (problem: string) =>
    new DamagedArchiveError(file, range.fromSeq, range.toSeq, problem);
  let header: Partial<ArchiveHeader>;
  try {
    header = JSON.parse(line) as Partial<ArchiveHeader>;
  } catch {
    throw damaged('its header is not JSON');
  }
  if (header.format !== 1) throw damaged(`its header says format ${String(header.format)}`);
  if (header.fromSeq !== range.fromSeq || header.toSeq !== range.toSeq) {
    throw damaged(`its header says seq ${header.fromSeq} to ${header.toSeq}`);
  }
  if (!isValueFormatName(header.codec) || header.compression !== ARCHIVE_COMPRESSION) {
    throw damaged(
      `it is encoded as ${header.codec}/${header.compression}, which this readie cannot read`,
    );
  }
  const blocks = header.blocks;
  if (
    !Array.isArray(blocks) ||
    typeof header.bodySha256 !== 'string' ||
    !Number.isInteger(header.bodyBytes) ||
    typeof header.origin !== 'object' ||
    header.origin === null ||
    typeof header.firstAt !== 'string' ||
    typeof header.lastAt !== 'string'
  ) {
    throw damaged('its header lacks its blocks, checksum or origin');
  }
  let seq = range.fromSeq;
  let bytes = 0;
  for (const block of blocks as Partial<ArchiveBlock>[]) {
    if (
      block.firstSeq !== seq ||
      !Number.isInteger(block.events) ||
      !Number.isInteger(block.bytes) ||
      !Number.isInteger(block.rawBytes) ||
      !((block.events as number) > 0) ||
      !((block.bytes as number) > 0)
    ) {
      throw damaged(`its blocks do not run from seq ${range.fromSeq} without gaps`);
    }
    seq += block.events as number;
    bytes += block.bytes as number;
  }
  if (seq !== range.toSeq + 1 || header.events !== range.toSeq - range.fromSeq + 1) {
    throw damaged(`its blocks hold seq ${range.fromSeq} to ${seq - 1}`);
  }
  if (bytes !== header.bodyBytes) throw damaged('its blocks do not add up to its body');
  const schemas: unknown = header.schemaVersions;
  if (
    !Array.isArray(schemas) ||
    schemas.length === 0 ||
    !schemas.every((v): v is number => Number.isInteger(v) && (v as number) >= 1)
  ) {
    throw damaged('its header lacks its schema versions');
  }
  const newest = Math.max(...schemas);
  if (newest > EVENT_SCHEMA_VERSION) {
    throw damaged(
      `its events are written in event schema v${newest}; this readie reads up to v${EVENT_SCHEMA_VERSION}`,
    );
  }
  const snapshots = header.snapshots ?? [];
  if (
    !Array.isArray(snapshots) ||
    snapshots.some((seq) => !Number.isInteger(seq) || seq < range.fromSeq || seq > range.toSeq)
  ) {
    throw damaged('its snapshots are not seqs it holds');
  }
  return { ...header, snapshots } as ArchiveHeader;
}
