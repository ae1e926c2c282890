/**
 * The binary event codec: an event in a few dozen bytes instead of a line of JSON, derived
 * from the vocabulary's own schemas (`schema.ts`). The layout is positional, so a schema change
 * (a field added, a word added to a closed list) changes how the values already on disk decode:
 * `test/events/event-codec.test.ts` pins each value format's layout, and a field added to a type
 * is laid out from a new value format on (`field-codecs.ts`), values of the older formats read
 * by their own layouts. Events are written in the newest format. Each event is its type's code, its instant, its cause, then its fields in
 * the schema's order, each by its kind: integers as varints, numbers as a varint or a double,
 * strings as UTF-8 or a back-reference to a string said before in the same context, the closed
 * lists of words as their index, nested objects field by field; records and anything the schemas
 * do not spell out as JSON text. `seq` is not stored: a value's key (LMDB) or its place (an
 * archive block) is its seq.
 *
 * Only an event this codec gives back exactly is encoded: in `exact` mode (an import, whose text
 * must come back byte for byte) its keys must be the schema's in the schema's order and its text
 * the canonical JSON of its fields; otherwise every key of the schema and no other. An event that
 * is not (unknown extra fields, a string that is not well-formed UTF-16, an instant that is not
 * canonical) is refused, and the caller stores its JSON text instead. Pure.
 */
import { isoInstant } from '../decode.js';
import type { ClusterEvent } from '../types.js';
import type { ByteReader, ByteWriter } from './byte-buffers.js';
import {
  CODEC_EVENT_TYPES,
  ENVELOPE_KEYS,
  FORMAT_FIELDS,
  NEWEST_VALUE_FORMAT,
  TYPE_CODES,
  TYPE_FIELDS,
  VALUE_FORMATS,
  type FieldCodec,
  type ValueFormat,
} from './field-codecs.js';

/**
 * What an encoder remembers between the events of one context (one LMDB value, one archive
 * block): the strings said so far and the last instant. A decoder keeps the same, in order.
 */
export class EncodeContext {
  /** The caller's record of the last instant found canonical, if it keeps one. */
  constructor(readonly canonical?: CanonicalInstant) {}

  readonly strings = new Map<string, number>();
  lastAtMs = 0;
  lastAtText = '';
  /** Strings added during the event being encoded (taken back if it is refused). */
  readonly added: string[] = [];
}

/**
 * The last instant text an encoder found canonical (the text `isoInstant` gives for its epoch
 * ms, so a decoder gives it back) and its ms. A writer that encodes value after value, each its
 * own context, with one `at` per append passes one to each context: the text is parsed and
 * checked once, not for every value. The caller's, like every cache.
 */
export class CanonicalInstant {
  text = '';
  ms = NaN;
}

/**
 * Instants a decoder formatted last: the last one, and the UTC day of it (epoch ms at its midnight)
 * with its `YYYY-MM-DDT`. Contexts may share one (the values of one read, each its own context).
 */
export class InstantCache {
  ms = NaN;
  text = '';
  dayMs = NaN;
  dayText = '';
}

/**
 * What a decoder remembers between the events of one context, and the value format the context
 * was written in (`field-codecs.ts`: each format lays the types out as they were then).
 */
export class DecodeContext {
  readonly strings: string[] = [];
  /** The last instant of this context, which the next is stored as a difference from. */
  lastAtMs = 0;
  lastAtText = '';

  constructor(
    readonly instants: InstantCache = new InstantCache(),
    readonly format: ValueFormat = NEWEST_VALUE_FORMAT,
  ) {}
}

/** The value cannot be encoded exactly (caught below: the event is kept as text). */
class Refused extends Error {
  override readonly name = 'Refused';
}

/**
 * Appends `event` to `out` in `context`; returns false, leaving both as they were, when the codec
 * would not give it back exactly (the caller keeps its JSON text instead). `exact`: the event's
 * keys must also be in the schema's order (the import of a text that must come back as it was).
 */
export function encodeEventBinary(
  event: ClusterEvent,
  out: ByteWriter,
  context: EncodeContext,
  exact = false,
): boolean {
  const fields = TYPE_FIELDS.get(event.type);
  const code = TYPE_CODES.get(event.type);
  if (fields === undefined || code === undefined) return false;
  const value = event as unknown as Record<string, unknown>;
  if (!hasKeys(value, fields, ENVELOPE_KEYS.length, exact)) return false;
  if (exact && !envelopeFirst(value)) return false;
  const start = out.length;
  const { lastAtMs, lastAtText } = context;
  context.added.length = 0;
  try {
    out.varint(code);
    writeInstant(event.at, out, context);
    if (event.cause === null) out.varint(0);
    else writeString(event.cause, out, context);
    for (const field of fields) writeField(field, value[field.key], out, context, exact);
    return true;
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    out.truncate(start);
    for (const text of context.added) context.strings.delete(text);
    context.lastAtMs = lastAtMs;
    context.lastAtText = lastAtText;
    return false;
  }
}

/** Reads the next event of `context` from `reader`, as raw fields to validate, with `seq`. */
export function decodeEventBinary(
  reader: ByteReader,
  seq: number,
  context: DecodeContext,
): Record<string, unknown> {
  return decodeEventOfCode(reader.varint(), reader, seq, context);
}

/** The same, once its type's code is read. */
export function decodeEventOfCode(
  code: number,
  reader: ByteReader,
  seq: number,
  context: DecodeContext,
): Record<string, unknown> {
  const decode = (DECODERS.get(context.format) as readonly (EventReader | undefined)[])[code];
  if (decode === undefined) throw new CodecError(`unknown event type code ${code}`);
  return decode(reader, seq, context);
}

/** Bytes that are not a value this codec wrote. */
export class CodecError extends Error {
  override readonly name = 'CodecError';
}

function hasKeys(
  value: Record<string, unknown>,
  fields: readonly FieldCodec[],
  extra: number,
  exact: boolean,
): boolean {
  const keys = Object.keys(value);
  if (keys.length !== fields.length + extra) return false;
  for (let i = 0; i < fields.length; i += 1) {
    const key = (fields[i] as FieldCodec).key;
    if (exact ? keys[i + extra] !== key : !Object.hasOwn(value, key)) return false;
  }
  return true;
}

function envelopeFirst(value: Record<string, unknown>): boolean {
  const keys = Object.keys(value);
  return ENVELOPE_KEYS.every((key, i) => keys[i] === key);
}

function writeInstant(at: string, out: ByteWriter, context: EncodeContext): void {
  let ms = context.lastAtMs;
  if (at !== context.lastAtText) {
    const known = context.canonical;
    if (known !== undefined && at === known.text && at !== '') {
      ms = known.ms;
    } else {
      ms = Date.parse(at);
      if (!Number.isSafeInteger(ms) || isoInstant(ms) !== at) throw new Refused();
      if (known !== undefined) {
        known.text = at;
        known.ms = ms;
      }
    }
  }
  // Zigzag: a clock may step back.
  const delta = ms - context.lastAtMs;
  out.varint(delta >= 0 ? delta * 2 : -delta * 2 - 1);
  context.lastAtMs = ms;
  context.lastAtText = at;
}

function readInstant(reader: ByteReader, context: DecodeContext): string {
  const zigzag = reader.varint();
  if (zigzag === 0 && context.lastAtText !== '') return context.lastAtText;
  const delta = zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
  const ms = context.lastAtMs + delta;
  context.lastAtMs = ms;
  const { instants } = context;
  if (instants.ms !== ms) {
    instants.ms = ms;
    instants.text = instantText(ms, instants);
  }
  context.lastAtText = instants.text;
  return context.lastAtText;
}

const DAY_MS = 86_400_000;

/** `isoInstant(ms)`, formatting only the time of day when the day is the context's last one. */
function instantText(ms: number, context: InstantCache): string {
  const day = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
  if (day !== context.dayMs) {
    context.dayMs = day;
    context.dayText = isoInstant(day).slice(0, 11);
  }
  const time = ms - day;
  const hours = Math.floor(time / 3_600_000);
  const minutes = Math.floor(time / 60_000) % 60;
  const seconds = Math.floor(time / 1000) % 60;
  const millis = time % 1000;
  return `${context.dayText}${two(hours)}:${two(minutes)}:${two(seconds)}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}

function two(value: number): string {
  return value < 10 ? `0${value}` : `${value}`;
}

/** A string: 0 null, 1 new (its bytes follow), n >= 2 the (n - 2)th string of the context. */
function writeString(text: string, out: ByteWriter, context: EncodeContext): void {
  const known = context.strings.get(text);
  if (known !== undefined) {
    out.varint(known + 2);
    return;
  }
  if (!(text as unknown as { isWellFormed(): boolean }).isWellFormed()) throw new Refused();
  out.varint(1);
  out.string(text);
  context.strings.set(text, context.strings.size);
  context.added.push(text);
}

function readString(reader: ByteReader, context: DecodeContext): string | null {
  const tag = reader.varint();
  if (tag === 0) return null;
  if (tag === 1) {
    const text = reader.string();
    context.strings.push(text);
    return text;
  }
  const known = context.strings[tag - 2];
  if (known === undefined) throw new CodecError(`string reference ${tag - 2} is unknown`);
  return known;
}

function writeField(
  field: FieldCodec,
  value: unknown,
  out: ByteWriter,
  context: EncodeContext,
  exact: boolean,
): void {
  if (value === null) {
    if (!field.nullable) throw new Refused();
    out.byte(0);
    return;
  }
  switch (field.kind) {
    case 'str':
      if (typeof value !== 'string') throw new Refused();
      writeString(value, out, context);
      return;
    case 'int':
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
        throw new Refused();
      out.varint(value + 1);
      return;
    case 'num':
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new Refused();
      if (Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)) {
        out.byte(1);
        out.varint(value);
      } else {
        out.byte(2);
        out.double(value);
      }
      return;
    case 'bool':
      if (typeof value !== 'boolean') throw new Refused();
      out.byte(value ? 2 : 1);
      return;
    case 'enum': {
      const index = field.index.get(value);
      if (index === undefined) throw new Refused();
      out.varint(index + 1);
      return;
    }
    case 'strs':
      if (!Array.isArray(value)) throw new Refused();
      out.varint(value.length + 1);
      for (const item of value) {
        if (typeof item !== 'string') throw new Refused();
        writeString(item, out, context);
      }
      return;
    case 'obj':
      writeObject(field.fields, value, out, context, exact);
      return;
    case 'objs':
      if (!Array.isArray(value)) throw new Refused();
      out.varint(value.length + 1);
      for (const item of value) writeObject(field.fields, item, out, context, exact);
      return;
    case 'json':
      out.byte(1);
      out.string(JSON.stringify(value));
      return;
  }
}

function writeObject(
  fields: readonly FieldCodec[],
  value: unknown,
  out: ByteWriter,
  context: EncodeContext,
  exact: boolean,
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Refused();
  const object = value as Record<string, unknown>;
  if (!hasKeys(object, fields, 0, exact)) throw new Refused();
  out.byte(1);
  for (const field of fields) writeField(field, object[field.key], out, context, exact);
}

/** Reads one value of a kind (the generated decoders call these). */
const READ = {
  str: readString,
  int(reader: ByteReader): number | null {
    const value = reader.varint();
    return value === 0 ? null : value - 1;
  },
  num(reader: ByteReader): number | null {
    const tag = reader.byte();
    if (tag === 0) return null;
    return tag === 1 ? reader.varint() : reader.double();
  },
  bool(reader: ByteReader): boolean | null {
    const tag = reader.byte();
    return tag === 0 ? null : tag === 2;
  },
  enum(reader: ByteReader, values: readonly string[]): string | null {
    const index = reader.varint();
    if (index === 0) return null;
    const word = values[index - 1];
    if (word === undefined) throw new CodecError(`word ${index - 1} of a closed list is unknown`);
    return word;
  },
  strs(reader: ByteReader, context: DecodeContext): (string | null)[] | null {
    const count = reader.varint();
    if (count === 0) return null;
    const items: (string | null)[] = [];
    for (let i = 1; i < count; i += 1) items.push(readString(reader, context));
    return items;
  },
  objs(
    reader: ByteReader,
    context: DecodeContext,
    readObject: ObjectReader,
  ): (Record<string, unknown> | null)[] | null {
    const count = reader.varint();
    if (count === 0) return null;
    const items: (Record<string, unknown> | null)[] = [];
    for (let i = 1; i < count; i += 1) items.push(readObject(reader, context));
    return items;
  },
  json(reader: ByteReader): unknown {
    if (reader.byte() === 0) return null;
    return JSON.parse(reader.string()) as unknown;
  },
  instant: readInstant,
};

type ObjectReader = (reader: ByteReader, context: DecodeContext) => Record<string, unknown> | null;
type EventReader = (
  reader: ByteReader,
  seq: number,
  context: DecodeContext,
) => Record<string, unknown>;

/**
 * The source of an object literal reading `fields` in order: one property each, so every event of
 * a type is built with the same shape in one step (assigning keys one by one in a loop made
 * decoding several times slower). `constants` collects what the source refers to by index.
 */
function fieldsSource(fields: readonly FieldCodec[], constants: unknown[]): string {
  return fields
    .map((field) => {
      const key = JSON.stringify(field.key);
      switch (field.kind) {
        case 'str':
        case 'strs':
          return `${key}: R.${field.kind}(reader, context)`;
        case 'int':
        case 'num':
        case 'bool':
        case 'json':
          return `${key}: R.${field.kind}(reader)`;
        case 'enum':
          constants.push(field.values);
          return `${key}: R.enum(reader, C[${constants.length - 1}])`;
        case 'obj':
          constants.push(objectReader(field.fields));
          return `${key}: C[${constants.length - 1}](reader, context)`;
        case 'objs':
          constants.push(objectReader(field.fields));
          return `${key}: R.objs(reader, context, C[${constants.length - 1}])`;
      }
    })
    .join(', ');
}

/** A generated reader of a nested object (a tag byte, then its fields). */
function objectReader(fields: readonly FieldCodec[]): ObjectReader {
  const constants: unknown[] = [];
  const body = `return reader.byte() === 0 ? null : { ${fieldsSource(fields, constants)} };`;
  return generated(body, 'reader, context', constants) as ObjectReader;
}

/** A generated reader of one event type's fields, after its code. */
function eventReader(type: string, fields: readonly FieldCodec[]): EventReader {
  const constants: unknown[] = [];
  const body =
    'const at = R.instant(reader, context); const cause = R.str(reader, context); ' +
    `return { seq, at, cause, type: ${JSON.stringify(type)}, ${fieldsSource(fields, constants)} };`;
  return generated(body, 'reader, seq, context', constants) as EventReader;
}

/**
 * A function compiled from source built above from the schemas alone (never from data), the way
 * the schema compiler (TypeBox) builds the validators.
 */
function generated(body: string, parameters: string, constants: readonly unknown[]): unknown {
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const factory = new Function('R', 'C', `return function (${parameters}) { ${body} };`) as (
    read: typeof READ,
    constants: readonly unknown[],
  ) => unknown;
  return factory(READ, constants);
}

/**
 * Each format's readers of each type, by code (`Snapshot` has none: it is always stored as JSON
 * text). A field a format does not lay out is read as absent.
 */
const DECODERS: ReadonlyMap<ValueFormat, readonly (EventReader | undefined)[]> = new Map(
  VALUE_FORMATS.map((format) => {
    const layout = FORMAT_FIELDS.get(format) as ReadonlyMap<string, readonly FieldCodec[]>;
    const readers = CODEC_EVENT_TYPES.map((type) => {
      const fields = layout.get(type);
      return fields === undefined ? undefined : eventReader(type, fields);
    });
    return [format, readers];
  }),
);
