/** Comparing a recorded decision with the one placement makes now, field by field. */
import { EVENT_FIELDS, FIELDS_ADDED_TO_V1, isEventType } from '../../src/events/schema.js';
import type { ClusterEvent, NewEvent } from '../../src/events/types.js';

/**
 * What a field absent from an older log means, where that is not `null`: a call placed before
 * routing existed was no cold load.
 */
const ABSENT_MEANS: Partial<Record<string, Readonly<Record<string, unknown>>>> = {
  CallPlaced: { coldLoad: false },
};

/**
 * How a decision's field is compared: what its absence means, and whether it is a field added to
 * the v1 vocabulary (a recorded event that leaves it out says nothing of it, and is not compared).
 */
interface ComparedField {
  readonly name: string;
  readonly absent: unknown;
  readonly addedToV1: boolean;
}

/** Each event type's fields as compared, in schema order (a constant table, read only). */
const COMPARED_FIELDS: Readonly<Record<string, readonly ComparedField[]>> = Object.fromEntries(
  Object.entries(EVENT_FIELDS).map(([type, fields]) => {
    const absent = ABSENT_MEANS[type] ?? {};
    const added: readonly string[] = isEventType(type) ? (FIELDS_ADDED_TO_V1[type] ?? []) : [];
    return [
      type,
      Object.keys(fields).map((name) => ({
        name,
        absent: absent[name] ?? null,
        addedToV1: added.includes(name),
      })),
    ];
  }),
);

/** An event without its envelope, keeping only the fields of its type (in schema order). */
export function decisionFields(event: ClusterEvent | NewEvent): Record<string, unknown> {
  const fields: Record<string, unknown> = { type: event.type };
  if (!isEventType(event.type)) return fields;
  const source = event as unknown as Record<string, unknown>;
  for (const field of COMPARED_FIELDS[event.type] ?? []) {
    fields[field.name] = source[field.name] ?? field.absent;
  }
  return fields;
}

/**
 * Whether `a` and `b` are certainly the same JSON: plain objects with the same keys in the same
 * order and arrays, down to equal strings, booleans, finite numbers and nulls. False when unsure
 * (anything else): the caller then compares their JSON text.
 */
function sameJsonShape(a: unknown, b: unknown, depth = 0): boolean {
  if (a === b) return a !== undefined && (typeof a !== 'number' || Number.isFinite(a));
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || depth > 32) {
    return false;
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i += 1) {
      if (!sameJsonShape(a[i], b[i], depth + 1)) return false;
    }
    return true;
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false;
  const keys = Object.keys(a);
  const otherKeys = Object.keys(b);
  if (keys.length !== otherKeys.length) return false;
  for (let i = 0; i < keys.length; i += 1) {
    const key = keys[i] as string;
    if (key !== otherKeys[i]) return false;
    if (!sameJsonShape(a[key], b[key], depth + 1)) return false;
  }
  return true;
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Whether two field values are the same JSON (the cheap exact check first, then the text). */
function same(a: unknown, b: unknown): boolean {
  return a === b || sameJsonShape(a, b) || JSON.stringify(a) === JSON.stringify(b);
}

function show(value: unknown): string {
  return value === null ? '-' : typeof value === 'string' ? value : JSON.stringify(value);
}

/** An event, or its `decisionFields`: either is compared the same. */
export type Compared = ClusterEvent | NewEvent | Readonly<Record<string, unknown>>;

/**
 * The first difference between the recorded decision events and the computed ones, in words,
 * or null when their `decisionFields` are the same JSON; read from the events themselves (no copy
 * of their fields is made for a decision that matches, as nearly all do). A field added to the v1
 * vocabulary that the log does not record is not compared.
 */
export function eventsDifference(
  recorded: readonly Compared[],
  computed: readonly Compared[],
): string | null {
  const length = Math.max(recorded.length, computed.length);
  for (let i = 0; i < length; i += 1) {
    const was = recorded[i];
    const now = computed[i];
    if (!was || !now) {
      return was
        ? `recorded a ${String(was.type)} that placement no longer makes`
        : `placement now also makes a ${String(now!.type)} the log does not record`;
    }
    if (was.type !== now.type) return `recorded ${String(was.type)}, now ${String(now.type)}`;
    if (!isEventType(now.type)) continue;
    const wasFields = was as unknown as Record<string, unknown>;
    const nowFields = now as unknown as Record<string, unknown>;
    for (const field of COMPARED_FIELDS[now.type] ?? []) {
      const before = wasFields[field.name] ?? field.absent;
      const after = nowFields[field.name] ?? field.absent;
      if (before === null && field.addedToV1) continue;
      if (!same(before, after)) {
        return `${String(now.type)}.${field.name}: recorded ${show(before)}, now ${show(after)}`;
      }
    }
  }
  return null;
}
