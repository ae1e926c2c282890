/**
 * The binary codec's view of the vocabulary (pure): each event type's code and, compiled from its
 * schema (`schema.ts`), how each of its fields is written (a layout pinned by the codec's tests:
 * changing it needs a new value format, `event-codec.ts`).
 */
import { Kind, OptionalKind, type TSchema } from '@sinclair/typebox';
import { EVENT_FIELDS, type EventType } from '../schema.js';

/**
 * The code of each event type: its index here. A new type is appended, never inserted, so
 * values written before it still decode (`test/events/event-codec.test.ts` pins the list).
 */
export const CODEC_EVENT_TYPES = [
  'RouterStarted',
  'CatalogueLoaded',
  'WorkerRegistered',
  'WorkerUtilization',
  'WorkerLeaving',
  'WorkerProbeFailed',
  'WorkerProbeSucceeded',
  'WorkerEvicted',
  'ContainerStateChanged',
  'ContainerForgotten',
  'CallRequested',
  'CallPlaced',
  'CallDialFailed',
  'CallRejected',
  'CallBound',
  'CallFinished',
  'ReservationExpired',
  'SessionPinned',
  'SessionUnpinned',
  'SessionExpired',
  'SessionEnded',
  'PinStaged',
  'RoutingRevised',
  'ResidencyChanged',
  'ResidencyProtected',
  'ResidencyBudget',
  'Snapshot',
  'LogSegmentArchived',
  'LogArchiveExpired',
  'CallQueued',
  'CallAdmitted',
  'CallLeftQueue',
  'SessionTurnRefused',
  'ImageBuilt',
  'ImageBuildFailed',
  'ImageRemoved',
  'QuotaChanged',
  'QuotaRemoved',
] as const satisfies readonly EventType[];

/** Compiles only while every event type has a code. */
type _EveryTypeCoded = True<EventType extends (typeof CODEC_EVENT_TYPES)[number] ? true : false>;
type True<T extends true> = T;

/** How one field is written. */
export type FieldCodec =
  | { readonly key: string; readonly nullable: boolean; readonly kind: 'int' | 'num' | 'str' }
  | { readonly key: string; readonly nullable: boolean; readonly kind: 'bool' | 'strs' | 'json' }
  | {
      readonly key: string;
      readonly nullable: boolean;
      readonly kind: 'enum';
      readonly values: readonly string[];
      readonly index: ReadonlyMap<unknown, number>;
    }
  | {
      readonly key: string;
      readonly nullable: boolean;
      readonly kind: 'obj' | 'objs';
      readonly fields: readonly FieldCodec[];
    };

export const ENVELOPE_KEYS = ['seq', 'at', 'cause', 'type'] as const;

function kindOf(schema: TSchema): string {
  return (schema as { [Kind]?: string })[Kind] ?? '';
}

/** The literal strings of a union of literals, or undefined for anything else. */
function literalValues(schema: TSchema): string[] | undefined {
  if (kindOf(schema) !== 'Union') return undefined;
  const members = (schema as unknown as { anyOf: TSchema[] }).anyOf;
  const values: string[] = [];
  for (const member of members) {
    const constant = (member as { const?: unknown }).const;
    if (kindOf(member) !== 'Literal' || typeof constant !== 'string') return undefined;
    values.push(constant);
  }
  return values;
}

/** The field codec of one property (a union with null is its member, nullable). */
function fieldCodec(key: string, property: TSchema, depth: number): FieldCodec {
  let schema = property;
  let nullable = false;
  if (kindOf(schema) === 'Union') {
    const members = (schema as unknown as { anyOf: TSchema[] }).anyOf;
    const others = members.filter((member) => kindOf(member) !== 'Null');
    if (others.length === 1 && others.length < members.length) {
      nullable = true;
      schema = others[0] as TSchema;
    }
  }
  const values = literalValues(schema);
  if (values) {
    return { key, nullable, kind: 'enum', values, index: new Map(values.map((v, i) => [v, i])) };
  }
  switch (kindOf(schema)) {
    case 'Integer':
      return { key, nullable, kind: 'int' };
    case 'Number':
      return { key, nullable, kind: 'num' };
    case 'String':
      return { key, nullable, kind: 'str' };
    case 'Boolean':
      return { key, nullable, kind: 'bool' };
    case 'Array': {
      const items = (schema as unknown as { items: TSchema }).items;
      if (kindOf(items) === 'String') return { key, nullable, kind: 'strs' };
      const fields = depth < 2 ? objectFields(items, depth + 1) : undefined;
      return fields ? { key, nullable, kind: 'objs', fields } : { key, nullable, kind: 'json' };
    }
    case 'Object': {
      const fields = depth < 2 ? objectFields(schema, depth + 1) : undefined;
      return fields ? { key, nullable, kind: 'obj', fields } : { key, nullable, kind: 'json' };
    }
    default:
      return { key, nullable, kind: 'json' };
  }
}

/**
 * The fields of an object schema whose every property is required or nullable (as events write
 * them): a property that may be absent yet not null cannot be told apart once encoded, so such an
 * object is JSON text instead (undefined here).
 */
function objectFields(schema: TSchema, depth: number): FieldCodec[] | undefined {
  if (kindOf(schema) !== 'Object') return undefined;
  const properties = (schema as unknown as { properties: Record<string, TSchema> }).properties;
  const fields: FieldCodec[] = [];
  for (const [key, property] of Object.entries(properties)) {
    const field = fieldCodec(key, property, depth);
    if (property[OptionalKind] === 'Optional' && !field.nullable) return undefined;
    fields.push(field);
  }
  return fields;
}

/**
 * The value formats of the binary codec, oldest first: a format is a layout of every type, and a
 * value says which it is written in (an LMDB value by its first byte, an archive file by its
 * header's `codec`). A field added to a schema is written from the format that added it on;
 * older formats lay the type out without it, so values already on disk decode as they were
 * written (the fields they lack read as absent: null). The newest format is the one written.
 */
export const VALUE_FORMATS = [1, 2, 3, 4, 5] as const;
/** A value format of the binary codec. */
export type ValueFormat = (typeof VALUE_FORMATS)[number];
/** The format new values are written in. */
export const NEWEST_VALUE_FORMAT: ValueFormat = 5;
/** A value format's name: what a log's `valueFormat` marker and an archive header's `codec` say. */
export type ValueFormatName = `readie-binary-v${ValueFormat}`;
/** Each value format by its name. */
export const VALUE_FORMAT_NAMES: Readonly<Record<ValueFormatName, ValueFormat>> =
  Object.fromEntries(VALUE_FORMATS.map((format) => [`readie-binary-v${format}`, format])) as Record<
    ValueFormatName,
    ValueFormat
  >;
/** The name of the format new values are written in. */
export const NEWEST_VALUE_FORMAT_NAME: ValueFormatName = `readie-binary-v${NEWEST_VALUE_FORMAT}`;

/** Whether `name` (read from a log or a file) names a value format this code reads. */
export function isValueFormatName(name: unknown): name is ValueFormatName {
  return typeof name === 'string' && Object.hasOwn(VALUE_FORMAT_NAMES, name);
}

/**
 * The fields each format added to the schemas' types (format 1 laid out every type as the v2
 * schemas had it). 2: `CallRequested.deadlineMs` (placement rules v6: deadlines in admission).
 * 3: `CallFinished.raised` (what an OK call's function raised, for the call history),
 * `CallRequested.imageKey` and `ImageBuilt.declarations` (placement rules v8: images). 4: no
 * field, a word (`WORDS_ADDED_BY_FORMAT`). 5: `CallFinished.inputsRaised` (how many of a batch's
 * inputs raised, for the call history).
 */
const FIELDS_ADDED_BY_FORMAT: Readonly<
  Record<ValueFormat, Partial<Record<EventType, readonly string[]>>>
> = {
  1: {},
  2: { CallRequested: ['deadlineMs'] },
  3: { CallFinished: ['raised'], CallRequested: ['imageKey'], ImageBuilt: ['declarations'] },
  4: {},
  5: { CallFinished: ['inputsRaised'] },
};

/**
 * The words each format added to a closed list (a field's enum), by type and field: a format
 * lays out the list without the words later formats added, so its values keep their indices and
 * a word it never knew is refused when writing it (the event then stays JSON text). 4:
 * `ImageRemoved.reason` `absent` (a worker's report of every image it holds).
 */
const WORDS_ADDED_BY_FORMAT: Readonly<
  Record<ValueFormat, Partial<Record<EventType, Readonly<Record<string, readonly string[]>>>>>
> = {
  1: {},
  2: {},
  3: {},
  4: { ImageRemoved: { reason: ['absent'] } },
  5: {},
};

/** `field` as `format` lays it out: an enum without the words later formats added. */
function inFormat(type: EventType, field: FieldCodec, format: ValueFormat): FieldCodec {
  if (field.kind !== 'enum') return field;
  const later = VALUE_FORMATS.filter((other) => other > format).flatMap(
    (other) => WORDS_ADDED_BY_FORMAT[other][type]?.[field.key] ?? [],
  );
  if (later.length === 0) return field;
  const values = field.values.filter((word) => !later.includes(word));
  return { ...field, values, index: new Map(values.map((v, i) => [v, i])) };
}

/** Whether `key` of `type` is laid out in `format` (added by it or by an older one). */
function laidOut(type: EventType, key: string, format: ValueFormat): boolean {
  for (const later of VALUE_FORMATS) {
    if (later > format && FIELDS_ADDED_BY_FORMAT[later][type]?.includes(key) === true) return false;
  }
  return true;
}

/** Each event type's fields in `format`, in the schema's order; `Snapshot` is always JSON text. */
function typeFields(format: ValueFormat): ReadonlyMap<string, readonly FieldCodec[]> {
  return new Map(
    CODEC_EVENT_TYPES.filter((type) => type !== 'Snapshot').map((type) => [
      type,
      Object.entries(EVENT_FIELDS[type] as Record<string, TSchema>)
        .filter(([key]) => laidOut(type, key, format))
        .map(([key, schema]) => inFormat(type, fieldCodec(key, schema, 0), format)),
    ]),
  );
}

/** Each event type's fields in each value format. */
export const FORMAT_FIELDS: ReadonlyMap<
  ValueFormat,
  ReadonlyMap<string, readonly FieldCodec[]>
> = new Map(VALUE_FORMATS.map((format) => [format, typeFields(format)]));

/** Each event type's fields in the format new values are written in. */
export const TYPE_FIELDS = FORMAT_FIELDS.get(NEWEST_VALUE_FORMAT) as ReadonlyMap<
  string,
  readonly FieldCodec[]
>;
export const TYPE_CODES: ReadonlyMap<unknown, number> = new Map(
  CODEC_EVENT_TYPES.map((type, code) => [type, code]),
);
