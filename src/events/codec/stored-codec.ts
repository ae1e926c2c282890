/**
 * Stored events in bytes (pure): an event in the binary codec when that gives it back exactly,
 * else its JSON text. Two containers use it: an LMDB value (one event: the byte 0x06 then the
 * binary event in value format 5, or 0x05 then one in format 4, 0x04 then one in format 3, 0x03
 * then one in format 2, or 0x01 then one in format 1, as values were written before; a `Snapshot`, the byte 0x02 then its JSON text compressed with brotli, a tenth of
 * its size; or the UTF-8 JSON text itself, which starts with `{`, so a log written before the
 * codec reads as it is) and an archive block (events one after the other, sharing their strings
 * and instants; an event kept as text is `TEXT_EVENT_CODE` then its text). Decoding validates
 * every event, as every reader does, and a value that is not one is an `InvalidEventError` naming
 * its seq.
 */
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import { decodeEvent, encodeEvent, validateEvent } from '../decode.js';
import { InvalidEventError } from '../errors.js';
import type { ClusterEvent, StoredEvent } from '../types.js';
import { ByteReader, ByteWriter, TruncatedBytesError } from './byte-buffers.js';
import type { ValueFormat } from './field-codecs.js';
import {
  type CanonicalInstant,
  CodecError,
  DecodeContext,
  InstantCache,
  decodeEventBinary,
  decodeEventOfCode,
  EncodeContext,
  encodeEventBinary,
} from './event-codec.js';

/** The first byte of an LMDB value in the binary codec's value format 1 (read, no longer written). */
export const BINARY_VALUE_V1 = 0x01;
/** The first byte of an LMDB value in the binary codec's value format 2 (read, no longer written). */
export const BINARY_VALUE_V2 = 0x03;
/** The first byte of an LMDB value in the binary codec's value format 3 (read, no longer written). */
export const BINARY_VALUE_V3 = 0x04;
/** The first byte of an LMDB value in the binary codec's value format 4 (read, no longer written). */
export const BINARY_VALUE_V4 = 0x05;
/** The first byte of an LMDB value in the binary codec's value format 5 (what is written). */
export const BINARY_VALUE_V5 = 0x06;
/** Each binary value format by an LMDB value's first byte. */
const BINARY_VALUE_FORMATS: ReadonlyMap<number | undefined, ValueFormat> = new Map([
  [BINARY_VALUE_V1, 1],
  [BINARY_VALUE_V2, 2],
  [BINARY_VALUE_V3, 3],
  [BINARY_VALUE_V4, 4],
  [BINARY_VALUE_V5, 5],
]);
/** The first byte of an LMDB value holding a `Snapshot`'s JSON text, brotli-compressed. */
export const SNAPSHOT_VALUE_V1 = 0x02;
/** The first byte of an LMDB value that is JSON text. */
const JSON_TEXT_START = 0x7b;
/** The code, in an archive block, of an event kept as its JSON text (event type codes are below). */
export const TEXT_EVENT_CODE = 0x7f;

/**
 * When the binary codec may stand for a stored event's text: `append` (the log's own append: any
 * event the codec takes; its text is then the JSON of its fields in the schema's order),
 * `canonical` (the text must be exactly the JSON of the event as read: key order aside, nothing
 * is lost), `exact` (the same, keys in the schema's order too: an import, given back byte for
 * byte).
 */
export type EncodeMode = 'append' | 'canonical' | 'exact';

/** A stored event read from binary: its text is the JSON of its fields, made when asked. */
class BinaryStoredEvent implements StoredEvent {
  private json: string | undefined;

  constructor(readonly event: ClusterEvent) {}

  get text(): string {
    this.json ??= encodeEvent(this.event);
    return this.json;
  }
}

/** Whether `mode` lets the binary codec stand for `text` (the caller then encodes binary). */
function binaryMayStand(event: ClusterEvent, text: string | undefined, mode: EncodeMode): boolean {
  if (event.type === 'Snapshot') return false;
  return mode === 'append' || text === undefined || encodeEvent(event) === text;
}

/** What a `Snapshot`'s JSON text has near its start (the envelope comes first). */
const SNAPSHOT_MARK = Buffer.from('"type":"Snapshot"');
/** How far into a text the envelope and its type are. */
const ENVELOPE_BYTES = 160;

/** Whether the JSON text in `bytes[start, end)` is a `Snapshot`, from its first bytes alone. */
function isSnapshotText(bytes: Buffer, start: number, end: number): boolean {
  return bytes.subarray(start, Math.min(end, start + ENVELOPE_BYTES)).includes(SNAPSHOT_MARK);
}

/** Whether an LMDB value is a `Snapshot` (always kept as JSON text), without decoding it. */
export function isSnapshotValue(value: Buffer): boolean {
  const first = value[0];
  return (
    first === SNAPSHOT_VALUE_V1 ||
    (first === JSON_TEXT_START && isSnapshotText(value, 0, value.length))
  );
}

/**
 * One event as an LMDB value: binary when `mode` allows and the codec takes it, else JSON text.
 * `canonical`: the writer's record of the last instant found canonical (see `CanonicalInstant`).
 */
export function encodeLogValue(
  event: ClusterEvent,
  text: string | undefined,
  mode: EncodeMode,
  scratch: ByteWriter,
  canonical?: CanonicalInstant,
): Buffer {
  if (event.type === 'Snapshot') {
    // Brotli's fastest quality: a snapshot of a thousand workers in 4 ms, to a tenth of its text.
    const compressed = brotliCompressSync(text ?? encodeEvent(event), {
      params: { [constants.BROTLI_PARAM_QUALITY]: 1 },
    });
    return Buffer.concat([Buffer.of(SNAPSHOT_VALUE_V1), compressed]);
  }
  if (binaryMayStand(event, text, mode)) {
    scratch.reset();
    scratch.byte(BINARY_VALUE_V5);
    if (encodeEventBinary(event, scratch, new EncodeContext(canonical), mode === 'exact')) {
      return scratch.bytes();
    }
  }
  return Buffer.from(text ?? encodeEvent(event), 'utf8');
}

/**
 * The event an LMDB value holds, validated; `seq` is its key. `instants`: the formatting of
 * instants shared by the values of one read.
 */
export function decodeLogValue(value: Buffer, seq: number, instants?: InstantCache): StoredEvent {
  const first = value[0];
  if (first === JSON_TEXT_START) {
    const text = value.toString('utf8');
    return { event: decodeEvent(text, { seq }), text };
  }
  if (first === SNAPSHOT_VALUE_V1) {
    let text: string;
    try {
      text = brotliDecompressSync(value.subarray(1)).toString('utf8');
    } catch (error) {
      throw new InvalidEventError(
        { seq },
        undefined,
        `not a readable snapshot (${(error as Error).message})`,
      );
    }
    return { event: decodeEvent(text, { seq }), text };
  }
  const format = BINARY_VALUE_FORMATS.get(first);
  if (format === undefined) {
    throw new InvalidEventError(
      { seq },
      undefined,
      `not a stored event: it starts with byte ${first ?? 'none'} (a log written by a newer readie?)`,
    );
  }
  let raw: Record<string, unknown>;
  try {
    const reader = new ByteReader(value, 1);
    raw = decodeEventBinary(reader, seq, new DecodeContext(instants, format));
    if (!reader.done) throw new CodecError('bytes follow the event');
  } catch (error) {
    throw unreadable(seq, error);
  }
  return binaryEvent(seq, raw);
}

/** Appends one event to an archive block (binary when `mode` allows and the codec takes it). */
export function encodeBlockEvent(
  stored: { readonly event: ClusterEvent; readonly text?: string },
  out: ByteWriter,
  context: EncodeContext,
  mode: EncodeMode,
): void {
  const { event } = stored;
  // An event read from the codec is its canonical text by construction: no text to compare.
  const text = stored instanceof BinaryStoredEvent ? undefined : stored.text;
  if (binaryMayStand(event, text, mode)) {
    if (encodeEventBinary(event, out, context, mode === 'exact')) return;
  }
  out.varint(TEXT_EVENT_CODE);
  out.string(text ?? encodeEvent(event));
}

/**
 * Reads the next event of an archive block, validated, as `seq`; with `skipSnapshot`, a
 * `Snapshot` is passed over undecoded (undefined): a reader that folds every event before it has
 * its state already.
 */
export function decodeBlockEvent(
  reader: ByteReader,
  seq: number,
  context: DecodeContext,
  skipSnapshot = false,
): StoredEvent | undefined {
  let code: number;
  try {
    code = reader.varint();
    if (code === TEXT_EVENT_CODE) {
      const bytes = reader.varint();
      const raw = reader.raw(bytes);
      if (skipSnapshot && isSnapshotText(raw, 0, raw.length)) return undefined;
      const text = raw.toString('utf8');
      return { event: decodeEvent(text, { seq }), text };
    }
  } catch (error) {
    throw unreadable(seq, error);
  }
  let raw: Record<string, unknown>;
  try {
    raw = decodeEventOfCode(code, reader, seq, context);
  } catch (error) {
    throw unreadable(seq, error);
  }
  return binaryEvent(seq, raw);
}

/** A decoded binary event, validated. */
function binaryEvent(seq: number, raw: Record<string, unknown>): StoredEvent {
  return new BinaryStoredEvent(validateEvent(raw, { seq }));
}

function unreadable(seq: number, error: unknown): unknown {
  if (error instanceof CodecError || error instanceof TruncatedBytesError) {
    return new InvalidEventError(
      { seq },
      undefined,
      `not a readable binary event (${error.message})`,
    );
  }
  return error;
}

export { ByteReader, ByteWriter, DecodeContext, EncodeContext, InstantCache };
