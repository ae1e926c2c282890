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

/** An event without its envelope, keeping only the fields of its type (in schema order). */
export function decisionFields(event: ClusterEvent | NewEvent): Record<string, unknown> {
  const fields: Record<string, unknown> = { type: event.type };
  if (!isEventType(event.type)) return fields;
  const source = event as unknown as Record<string, unknown>;
  const absent = ABSENT_MEANS[event.type] ?? {};
  for (const name of Object.keys(EVENT_FIELDS[event.type])) {
    fields[name] = source[name] ?? absent[name] ?? null;
  }
  return fields;
}

function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function show(value: unknown): string {
  return value === null ? '-' : typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * Whether `field` of a recorded event of `type` says nothing: a field this implementation added to
 * the v1 vocabulary that the recorded event leaves out (a log written in the documented vocabulary),
 * which is not compared.
 */
function leftOut(type: unknown, field: string, recorded: unknown): boolean {
  if (recorded !== null || !isEventType(type)) return false;
  const added: readonly string[] = FIELDS_ADDED_TO_V1[type] ?? [];
  return added.includes(field);
}

/**
 * The first difference between the recorded decision events and the computed ones, in words,
 * or null when they are the same. A field added to the v1 vocabulary that the log does not record
 * is not compared.
 */
export function firstDifference(
  recorded: readonly Record<string, unknown>[],
  computed: readonly Record<string, unknown>[],
): string | null {
  const length = Math.max(recorded.length, computed.length);
  for (let i = 0; i < length; i += 1) {
    const was = recorded[i];
    const now = computed[i];
    if (!was || !now) {
      const extra = (was ?? now) as Record<string, unknown>;
      return was
        ? `recorded a ${String(extra.type)} that placement no longer makes`
        : `placement now also makes a ${String(extra.type)} the log does not record`;
    }
    if (was.type !== now.type) return `recorded ${String(was.type)}, now ${String(now.type)}`;
    for (const field of Object.keys(now)) {
      if (leftOut(was.type, field, was[field])) continue;
      if (!same(was[field], now[field])) {
        return `${String(now.type)}.${field}: recorded ${show(was[field])}, now ${show(now[field])}`;
      }
    }
  }
  return null;
}
