/**
 * How the router reads and writes the messages it relays, without copying payloads it only
 * passes on. The wire contract lays the relayed messages out alike on purpose:
 *
 * - `RequestExecutionRequest.chunk` (field 2) and `ExecuteRequest.chunk` (field 2) are the same
 *   field, so the bytes of a client's chunk message are a valid worker chunk message;
 * - `ExecuteResponse` and `RequestExecutionResponse` are both `ids = 1, chunk = 2, log = 3`, so a
 *   worker's answer is a valid client answer, and only its IDs need rewriting (when they differ).
 *
 * Configs, headers and IDs are decoded and encoded with the generated code; payload chunks stay
 * the bytes they arrived as. Anything that is not the plain common case (unknown fields, a
 * message holding both oneof members) goes through the generated code, with its semantics (the
 * last oneof member wins).
 */
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { makeGenericClientConstructor } from '@grpc/grpc-js';
import type { ChannelCredentials, Client, ClientDuplexStream, ClientOptions } from '@grpc/grpc-js';
import type { Metadata, CallOptions, ServiceDefinition } from '@grpc/grpc-js';
import { CallIds } from '../../proto/gen/readie/v1/call.js';
import { ExecuteRequest, ExecutionServiceService } from '../../proto/gen/readie/v1/execution.js';
import {
  ProxyServiceService,
  RequestExecutionRequest,
  RequestExecutionResponse,
} from '../../proto/gen/readie/v1/proxy.js';
import { UndecodableMessageError } from '../../shared/wire-decoding.js';
import type {
  ClientAnswer,
  ClientMessage,
  WorkerAnswer,
  WorkerMessage,
} from '../../core/calls/relay-messages.js';

interface FieldSpan {
  readonly field: number;
  readonly wireType: WireType;
  /** Where the field starts (its tag). */
  readonly start: number;
  /** Where its value starts (after tag and length). */
  readonly valueStart: number;
  readonly end: number;
}

/** The top-level fields of a message, in order (throws on malformed protobuf). */
function fieldsOf(wire: Uint8Array): FieldSpan[] {
  const reader = new BinaryReader(wire);
  const spans: FieldSpan[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [field, wireType] = reader.tag();
    let valueStart = reader.pos;
    if (wireType === WireType.LengthDelimited) {
      const length = reader.uint32();
      valueStart = reader.pos;
      reader.pos += length;
      if (reader.pos > reader.len) throw new RangeError('premature end of message');
    } else {
      reader.skip(wireType, field);
    }
    spans.push({ field, wireType, start, valueStart, end: reader.pos });
  }
  return spans;
}

/** The length of the last `data` (field 1) of an encoded `PayloadChunk`. */
function chunkDataLength(chunk: Uint8Array): number {
  let length = 0;
  for (const span of fieldsOf(chunk)) {
    if (span.field === 1 && span.wireType === WireType.LengthDelimited) {
      length = span.end - span.valueStart;
    }
  }
  return length;
}

/** The last span of one of `fields` that is length-delimited (a oneof member or message field). */
function lastOf(spans: readonly FieldSpan[], fields: readonly number[]): FieldSpan | undefined {
  let last: FieldSpan | undefined;
  for (const span of spans) {
    if (fields.includes(span.field) && span.wireType === WireType.LengthDelimited) last = span;
  }
  return last;
}

/**
 * Reads a client message (the server's request deserializer). Bytes that are not a valid message
 * become an `undecodable` message, which the call path refuses with `INVALID_ARGUMENT`.
 */
export function decodeClientMessage(wire: Buffer): ClientMessage {
  try {
    return decodeValidClientMessage(wire);
  } catch (error) {
    const problem = error instanceof Error ? error.message : String(error);
    return {
      kind: 'undecodable',
      problem: new UndecodableMessageError(ProxyServiceService.requestExecution.path, problem)
        .message,
    };
  }
}

function decodeValidClientMessage(wire: Buffer): ClientMessage {
  const spans = fieldsOf(wire);
  const last = lastOf(spans, [1, 2]);
  if (last === undefined) return { kind: 'empty' };
  const onlyChunks = spans.every((span) => span.field === 2);
  if (last.field === 2 && onlyChunks) {
    return {
      kind: 'chunk',
      bytes: chunkDataLength(wire.subarray(last.valueStart, last.end)),
      wire,
    };
  }
  const message = RequestExecutionRequest.decode(wire).message;
  if (message?.$case === 'config') return { kind: 'config', config: message.value };
  if (message?.$case === 'chunk') {
    const reencoded = Buffer.from(
      ExecuteRequest.encode({ message: { $case: 'chunk', value: message.value } }).finish(),
    );
    return { kind: 'chunk', bytes: message.value.data.length, wire: reencoded };
  }
  return { kind: 'empty' };
}

/** Writes a client message (the inverse of `decodeClientMessage`, for clients of this codec). */
export function encodeClientMessage(message: ClientMessage): Buffer {
  switch (message.kind) {
    case 'config':
      return Buffer.from(
        RequestExecutionRequest.encode({
          message: { $case: 'config', value: message.config },
        }).finish(),
      );
    case 'chunk':
      return message.wire;
    case 'empty':
    case 'undecodable':
      return Buffer.alloc(0);
  }
}

/** Writes a message to a worker (the worker client's request serializer). */
export function encodeWorkerMessage(message: WorkerMessage): Buffer {
  if (message.kind === 'chunk') return message.wire;
  return Buffer.from(
    ExecuteRequest.encode({ message: { $case: 'header', value: message.header } }).finish(),
  );
}

/** Reads a message meant for a worker (the inverse, for tests and scripted workers). */
export function decodeWorkerMessage(wire: Buffer): WorkerMessage {
  const message = ExecuteRequest.decode(wire).message;
  if (message?.$case === 'header') return { kind: 'header', header: message.value };
  return { kind: 'chunk', wire };
}

/** Reads a worker's answer (the worker client's response deserializer). */
export function decodeWorkerAnswer(wire: Buffer): WorkerAnswer {
  const spans = fieldsOf(wire);
  const idSpan = lastOf(spans, [1]);
  const carried = lastOf(spans, [2, 3]);
  const ids = idSpan ? CallIds.decode(wire.subarray(idSpan.valueStart, idSpan.end)) : undefined;
  const idFields = spans.filter((span) => span.field === 1);
  let body: Buffer;
  if (idFields.length === 0) body = wire;
  else if (idFields.length === 1 && idFields[0]?.start === 0) body = wire.subarray(idFields[0].end);
  else {
    body = Buffer.concat(
      spans.filter((span) => span.field !== 1).map((span) => wire.subarray(span.start, span.end)),
    );
  }
  return {
    ids,
    carries: carried === undefined ? 'nothing' : carried.field === 2 ? 'chunk' : 'log',
    chunkBytes:
      carried?.field === 2 ? chunkDataLength(wire.subarray(carried.valueStart, carried.end)) : 0,
    wire,
    body,
  };
}

/** Whether two sets of call IDs are the same. */
export function sameIds(a: CallIds | undefined, b: CallIds): boolean {
  return (
    a !== undefined &&
    a.requestId === b.requestId &&
    a.sessionId === b.sessionId &&
    a.workerId === b.workerId &&
    a.containerId === b.containerId &&
    a.checkpointId === b.checkpointId
  );
}

/** Writes an answer to the client (the server's response serializer). */
export function encodeClientAnswer(answer: ClientAnswer): Buffer {
  const parts = clientAnswerParts(answer);
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** Bodies at least this long are written after the router's IDs as they are, not copied. */
const UNCOPIED_BODY_BYTES = 64 * 1024;

/**
 * An answer to the client as the parts its message is made of, in order: the worker's bytes when
 * they go on unchanged; else the router's IDs and then the rest of the worker's message, which a
 * transport writes on as it came (a large chunk is not copied) unless it is small.
 */
export function clientAnswerParts(answer: ClientAnswer): readonly Buffer[] {
  if (answer.kind === 'message') {
    return [Buffer.from(RequestExecutionResponse.encode(answer.message).finish())];
  }
  const { ids, answer: relayed } = answer;
  if (sameIds(relayed.ids, ids)) return [relayed.wire];
  const idField = Buffer.from(
    CallIds.encode(ids, new BinaryWriter().uint32(10).fork()).join().finish(),
  );
  if (relayed.body.length < UNCOPIED_BODY_BYTES) return [Buffer.concat([idField, relayed.body])];
  return [idField, relayed.body];
}

/** Reads an answer as a client would (for tests): the generated decoder. */
export function decodeClientAnswer(wire: Buffer): RequestExecutionResponse {
  return RequestExecutionResponse.decode(wire);
}

/** `ProxyService` as the router serves it: chunks in and answers out stay wire bytes. */
export const RelayProxyService = {
  requestExecution: {
    path: ProxyServiceService.requestExecution.path,
    requestStream: true,
    responseStream: true,
    requestSerialize: encodeClientMessage,
    requestDeserialize: decodeClientMessage,
    responseSerialize: encodeClientAnswer,
    responseDeserialize: (wire: Buffer): ClientAnswer => ({
      kind: 'message',
      message: decodeClientAnswer(wire),
    }),
  },
} satisfies ServiceDefinition;

/** `ExecutionService` as the router calls it: chunks out and answers in stay wire bytes. */
export const RelayExecutionService = {
  execute: {
    path: ExecutionServiceService.execute.path,
    requestStream: true,
    responseStream: true,
    requestSerialize: encodeWorkerMessage,
    requestDeserialize: decodeWorkerMessage,
    responseSerialize: (answer: WorkerAnswer): Buffer => answer.wire,
    responseDeserialize: decodeWorkerAnswer,
  },
} satisfies ServiceDefinition;

/** The router's client of a worker's `ExecutionService`, speaking the relay codec. */
export interface RelayExecutionClient extends Client {
  execute(
    metadata: Metadata,
    options?: Partial<CallOptions>,
  ): ClientDuplexStream<WorkerMessage, WorkerAnswer>;
}

/** The constructor of `RelayExecutionClient`s. */
export const RelayExecutionClient = makeGenericClientConstructor(
  RelayExecutionService,
  'readie.v1.ExecutionService',
) as unknown as new (
  address: string,
  credentials: ChannelCredentials,
  options?: Partial<ClientOptions>,
) => RelayExecutionClient;
