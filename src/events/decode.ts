/**
 * Reading events: parse, validate against the v1 schemas, normalize absent optional fields to
 * `null`, and check that `seq` runs without gaps. Every refusal names the seq or line and field.
 */
import { OptionalKind, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { InvalidEventError, type EventLocation } from './errors.js';
import { explainMismatch, showValue } from './schema-errors.js';
import { EVENT_SCHEMAS, EVENT_TYPES } from './schema.js';
import type { ClusterEvent } from './types.js';

type Normalizer = (value: Record<string, unknown>) => void;

interface TypeReader {
  readonly check: TypeCheck<TSchema>;
  readonly normalize: Normalizer;
}

function isObjectSchema(schema: TSchema): boolean {
  return schema.type === 'object' && typeof schema.properties === 'object';
}

/** Builds a function that sets absent optional fields to `null`, recursing into nested objects. */
function normalizerFor(schema: TSchema): Normalizer {
  const properties = schema.properties as Record<string, TSchema>;
  const optional = Object.keys(properties).filter(
    (key) => properties[key]?.[OptionalKind] === 'Optional',
  );
  const nested: [string, Normalizer][] = Object.entries(properties)
    .filter(([, child]) => isObjectSchema(child))
    .map(([key, child]) => [key, normalizerFor(child)]);
  return (value) => {
    for (const key of optional) if (value[key] === undefined) value[key] = null;
    for (const [key, normalize] of nested) {
      const child = value[key];
      if (typeof child === 'object' && child !== null) normalize(child as Record<string, unknown>);
    }
  };
}

/** The reader of each event type (a Map: one lookup per event, and unknown types miss). */
const READERS: ReadonlyMap<unknown, TypeReader> = new Map(
  EVENT_TYPES.map((type) => {
    const schema = EVENT_SCHEMAS[type];
    return [type, { check: TypeCompiler.Compile(schema), normalize: normalizerFor(schema) }];
  }),
);

/**
 * Validates a parsed value as an event and normalizes it in place (absent optional fields become
 * `null`). Throws `InvalidEventError` naming the seq or line and the field.
 */
export function validateEvent(raw: unknown, location: EventLocation = {}): ClusterEvent {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new InvalidEventError(location, undefined, `not a JSON object: ${showValue(raw)}`);
  }
  const value = raw as Record<string, unknown>;
  const type = value.type;
  const reader = READERS.get(type);
  if (!reader || !reader.check.Check(value)) {
    const where: EventLocation = {
      ...location,
      seq: typeof value.seq === 'number' ? value.seq : location.seq,
    };
    if (type === undefined) throw new InvalidEventError(where, 'type', 'is required but missing');
    if (!reader)
      throw new InvalidEventError(where, 'type', `unknown event type ${showValue(type)}`);
    const { field, problem } = explainMismatch(reader.check, value);
    throw new InvalidEventError(where, field, problem);
  }
  reader.normalize(value);
  return value as ClusterEvent;
}

/** Parses one JSONL line (or stored text) into a validated event. */
export function decodeEvent(text: string, location: EventLocation = {}): ClusterEvent {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    const seq = /"seq"\s*:\s*(\d+)/.exec(text)?.[1];
    const where = {
      ...location,
      seq: location.seq ?? (seq === undefined ? undefined : Number(seq)),
    };
    throw new InvalidEventError(where, undefined, `not valid JSON (${(error as Error).message})`);
  }
  return validateEvent(raw, location);
}

/** The text an event is stored as: one line of JSON, no newline. */
export function encodeEvent(event: ClusterEvent): string {
  return JSON.stringify(event);
}

/**
 * Checks that events arrive in `seq` order without gaps. The first event may start anywhere
 * (an exported range starts mid-log); each later one must be exactly one more.
 */
export class SeqOrder {
  private last: number | undefined;

  /** The seq of the last event accepted, if any. */
  get lastSeq(): number | undefined {
    return this.last;
  }

  /** Notes that the event at `seq` was passed over unread (the next must follow it). */
  skip(seq: number): void {
    this.last = seq;
  }

  /** Accepts the event or throws `InvalidEventError` naming its seq (and line) and `seq`. */
  accept(event: ClusterEvent, location: EventLocation = {}): void {
    if (this.last !== undefined && event.seq !== this.last + 1) {
      const problem =
        event.seq <= this.last
          ? `out of order: ${event.seq} comes after ${this.last}`
          : `gap: expected ${this.last + 1} after ${this.last}, got ${event.seq}`;
      throw new InvalidEventError({ ...location, seq: event.seq }, 'seq', problem);
    }
    this.last = event.seq;
  }
}

/** The ISO-8601 UTC timestamp with milliseconds of an epoch-millisecond instant. */
export function isoInstant(epochMs: number): string {
  return new Date(epochMs).toISOString();
}
