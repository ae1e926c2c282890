/**
 * The event lines a zygote or a spawner writes on stdout (one JSON object a line,
 * src/executor/readie_executor/zygote.py and criu.py), checked on arrival: a line from another
 * process is data, not a promise, so it is validated against these schemas (TypeBox, as the
 * events are) instead of cast. Pure.
 */
import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { explainMismatch, showValue } from '../../../events/schema-errors.js';

const Text = T.String();
const Pid = T.Integer({ minimum: 1 });
const Nullable = <S extends ReturnType<typeof T.Integer>>(schema: S) => T.Union([schema, T.Null()]);

/** A zygote or spawner event. Extra fields are allowed (newer executors may add some). */
export const ZygoteEventSchema = T.Union([
  T.Object({
    event: T.Literal('ready'),
    checkpoint: Text,
    modules: T.Array(Text),
    python: Text,
    importMs: T.Number({ minimum: 0 }),
    /** How long `criu dump` took (a CRIU seed only). */
    dumpMs: T.Optional(T.Number({ minimum: 0 })),
    pid: Pid,
  }),
  T.Object({ event: T.Literal('failed'), checkpoint: Text, error: Text }),
  T.Object({ event: T.Literal('seeded') }),
  T.Object({ event: T.Literal('spawned'), container: Text, pid: Pid }),
  /** The container's network namespace is ready for its egress stack (`--network egress`). */
  T.Object({ event: T.Literal('network'), container: Text }),
  T.Object({ event: T.Literal('spawn-failed'), container: Text, error: Text }),
  T.Object({ event: T.Literal('sandbox-failed'), container: Text, error: Text }),
  T.Object({
    event: T.Literal('exited'),
    container: Text,
    pid: Pid,
    code: Nullable(T.Integer()),
    signal: Nullable(T.Integer({ minimum: 1 })),
  }),
]);

/** An event line from a zygote or a spawner. */
export type ZygoteEvent = Static<typeof ZygoteEventSchema>;

/** Each event's check, by its `event` name (one lookup per line, and unknown names miss). */
const EVENT_SCHEMAS: ReadonlyMap<string, TypeCheck<TSchema>> = new Map(
  ZygoteEventSchema.anyOf.map((schema) => [
    schema.properties.event.const as string,
    TypeCompiler.Compile(schema),
  ]),
);

/** What is wrong with a line that is not an event, or the event. */
export type ParsedZygoteLine =
  | { readonly ok: true; readonly event: ZygoteEvent }
  | { readonly ok: false; readonly problem: string };

/** Parses and checks one line; says what is wrong (the field, and what it held) otherwise. */
export function parseZygoteEvent(line: string): ParsedZygoteLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    return { ok: false, problem: `not JSON (${(error as Error).message})` };
  }
  const kind = (value as { event?: unknown } | null)?.event;
  const check = typeof kind === 'string' ? EVENT_SCHEMAS.get(kind) : undefined;
  if (!check) return { ok: false, problem: `unknown event ${showValue(kind)}` };
  if (!check.Check(value)) {
    const { field, problem } = explainMismatch(check, value);
    return { ok: false, problem: `${String(kind)} event: field "${field ?? '?'}" ${problem}` };
  }
  return { ok: true, event: value as ZygoteEvent };
}
