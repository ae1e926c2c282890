/** TypeScript types of the event vocabulary, derived from the schemas in `schema.ts`. */
import type { Static, TSchema } from '@sinclair/typebox';
import type { DemandSchema, EVENT_SCHEMAS, EventType } from './schema.js';

/** Optional fields made present-but-nullable, as every event is once read. */
type Normalized<T> = T extends readonly unknown[]
  ? T
  : T extends Record<string, unknown>
    ? { [K in keyof T]-?: Normalized<Exclude<T[K], undefined>> }
    : T;

type Read<S extends TSchema> = Normalized<Static<S>>;

/** One event of type `K`, with its envelope. */
export type EventOf<K extends EventType> = Read<(typeof EVENT_SCHEMAS)[K]>;

/** Any event of the log: the discriminated union over `type`. */
export type ClusterEvent = { [K in EventType]: EventOf<K> }[EventType];

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The envelope the log stamps on every event it appends: `seq`, `at` and the append's `cause`. */
export type Envelope = 'seq' | 'at' | 'cause';

/** An event as its author builds it: the log assigns `seq` and stamps `at` and `cause`. */
export type NewEvent = DistributiveOmit<ClusterEvent, Envelope>;

/** An event of type `K` as its author builds it. */
export type NewEventOf<K extends EventType> = Omit<EventOf<K>, Envelope>;

/** A call's demand as the client sent it (optional parts are `null`). */
export type Demand = Read<typeof DemandSchema>;

/** A stored event beside the exact text it was stored as (one JSONL line, no newline). */
export interface StoredEvent {
  readonly event: ClusterEvent;
  readonly text: string;
}

/** Fails to compile when a switch over event types misses one; throws if reached at runtime. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
