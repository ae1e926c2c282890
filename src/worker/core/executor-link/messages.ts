/**
 * The JSON bodies of the executor's control frames (docs/executor-protocol.md), checked on arrival:
 * the executor runs user code beside it, so what it sends is data to validate (TypeBox, as the
 * events are), never a type to cast to. A body that does not fit is a protocol error naming the
 * frame and the field. Pure.
 */
import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { explainMismatch } from '../../../events/schema-errors.js';
import { MAX_RAISED_MESSAGE_LENGTH, MAX_RAISED_TYPE_LENGTH } from '../../../shared/raised.js';
import { decodeJsonBody, FrameProtocolError, frameTypeName, type Frame } from './frames.js';

/** HELLO: who the executor is, on every connection. */
export const ExecutorHelloSchema = T.Object({
  protocol: T.Integer(),
  python: T.String(),
  container: T.String(),
  checkpoint: T.String(),
  modules: T.Array(T.String()),
  dns: T.Object({ ok: T.Boolean(), detail: T.String() }),
});

/** INSTALL_DONE: whether the install succeeded, and in words. */
export const InstallDoneSchema = T.Object({ ok: T.Boolean(), message: T.String() });

/** IMAGE_DONE: whether the image was entered; a failed import names its module and traceback. */
export const ImageDoneSchema = T.Object({
  ok: T.Boolean(),
  message: T.String(),
  module: T.Union([T.String(), T.Null()]),
});

/** The longest traceback a RESULT_END carries (UTF-16 units: the executor keeps its end). */
export const MAX_RAISED_TRACEBACK_LENGTH = 8192;

/**
 * RESULT_END: whether the function returned, and how long it ran; for a plain call whose function
 * raised, what it raised: the type name, the first line of its message and the traceback, each
 * bounded (docs/executor-protocol.md).
 */
export const ResultEndSchema = T.Object({
  ok: T.Boolean(),
  ms: T.Number({ minimum: 0 }),
  raised: T.Optional(
    T.Object({
      type: T.String({ minLength: 1, maxLength: MAX_RAISED_TYPE_LENGTH }),
      message: T.String({ maxLength: MAX_RAISED_MESSAGE_LENGTH }),
      traceback: T.String({ maxLength: MAX_RAISED_TRACEBACK_LENGTH }),
    }),
  ),
});

/** ERROR: the executor refused what the worker sent. */
export const ExecutorErrorSchema = T.Object({
  message: T.String(),
  /** Why, when it is not a protocol error: `version` (a pinned call's version is not held). */
  reason: T.Optional(T.String()),
});

/** What the executor says first on every connection. */
export type ExecutorHello = Static<typeof ExecutorHelloSchema>;
/** The end of an install. */
export type InstallDone = Static<typeof InstallDoneSchema>;
/** The end of an IMAGE step. */
export type ImageDone = Static<typeof ImageDoneSchema>;
/** The end of a result. */
export type ResultEnd = Static<typeof ResultEndSchema>;
/** The executor's refusal. */
export type ExecutorError = Static<typeof ExecutorErrorSchema>;

const CHECKS: ReadonlyMap<TSchema, TypeCheck<TSchema>> = new Map(
  [
    ExecutorHelloSchema,
    InstallDoneSchema,
    ImageDoneSchema,
    ResultEndSchema,
    ExecutorErrorSchema,
  ].map((schema) => [schema, TypeCompiler.Compile(schema)]),
);

/** A control frame's body, checked against `schema`; a `FrameProtocolError` says what is wrong. */
export function readFrameBody<S extends TSchema>(frame: Frame, schema: S): Static<S> {
  const value = decodeJsonBody(frame);
  const check = CHECKS.get(schema) ?? TypeCompiler.Compile(schema);
  if (check.Check(value)) return value;
  const { field, problem } = explainMismatch(check, value);
  throw new FrameProtocolError(
    `the ${frameTypeName(frame.type)} frame does not fit the protocol: ${field === undefined ? '' : `field "${field}" `}${problem}`,
  );
}
