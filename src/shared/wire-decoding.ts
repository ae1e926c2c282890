/**
 * Messages that cannot be decoded. The side that decodes a request answers it: bytes that are not
 * valid protobuf of the method's request type get `INVALID_ARGUMENT` naming what could not be read,
 * never `INTERNAL` (grpc-js's own answer when a deserializer throws) and never a crash. Transport
 * neutral: a deserializer hands an {@link Undecodable} on instead of throwing, and whoever handles
 * the message (a unary handler wrapper here, a stream's state machine, another transport's reader)
 * refuses it with its error.
 */
import { grpcCodeNumber } from './grpc-codes.js';
import { StatusError } from './status-error.js';

/** A request whose bytes are not a valid message of its type. */
export class UndecodableMessageError extends StatusError {
  override readonly name = 'UndecodableMessageError';
  readonly code = 'INVALID_ARGUMENT';

  constructor(
    readonly method: string,
    problem: string,
  ) {
    super(
      `could not decode the request message of ${method}: ${problem} ` +
        "(not valid protobuf of that method's request type: build the client from readie's proto/)",
    );
  }
}

/** What a deserializer hands on for bytes it could not decode. */
export class Undecodable {
  constructor(readonly error: UndecodableMessageError) {}
}

/** `decode` for `method`'s requests, answering an {@link Undecodable} instead of throwing. */
export function decodingSafely<T>(
  method: string,
  decode: (bytes: Buffer) => T,
): (bytes: Buffer) => T | Undecodable {
  return (bytes) => {
    try {
      return decode(bytes);
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error);
      return new Undecodable(new UndecodableMessageError(method, problem));
    }
  };
}

/** The parts of a gRPC method definition this module reads (grpc-js's shape, no import of it). */
interface MethodShape {
  readonly path: string;
  readonly originalName?: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly requestDeserialize: (bytes: Buffer) => unknown;
}

/** A unary handler, as grpc-js calls it. */
type UnaryHandler = (
  call: { readonly request: unknown },
  callback: (error: { code: number; details: string } | null, value?: unknown) => void,
) => void;

/** A server-streaming handler, as grpc-js calls it. */
type ServerStreamHandler = (call: {
  readonly request: unknown;
  emit(event: 'error', status: { code: number; details: string }): boolean;
}) => void;

function refusal(undecodable: Undecodable): { code: number; details: string } {
  return { code: grpcCodeNumber('INVALID_ARGUMENT'), details: undecodable.error.message };
}

function refusingInUnary(handler: UnaryHandler): UnaryHandler {
  return (call, callback) => {
    if (call.request instanceof Undecodable) callback(refusal(call.request));
    else handler(call, callback);
  };
}

function refusingInServerStream(handler: ServerStreamHandler): ServerStreamHandler {
  return (call) => {
    if (call.request instanceof Undecodable) call.emit('error', refusal(call.request));
    else handler(call);
  };
}

/**
 * A service definition whose request deserializers never throw, and its implementation with
 * every handler of a single request (unary or server-streaming) refusing an undecodable one
 * (`INVALID_ARGUMENT`) before it runs. Handlers of request streams are handed the
 * {@link Undecodable} as a message and refuse it themselves.
 */
export function decodingService<D extends object, I extends object>(
  definition: D,
  implementation: I,
): [D, I] {
  const methods = Object.entries(definition as Record<string, MethodShape>);
  const safeDefinition = Object.fromEntries(
    methods.map(([name, method]) => [
      name,
      { ...method, requestDeserialize: decodingSafely(method.path, method.requestDeserialize) },
    ]),
  );
  const handlers = implementation as Record<string, unknown>;
  const safeImplementation: Record<string, unknown> = { ...handlers };
  for (const [key, method] of methods) {
    // grpc-js finds a handler by the definition's key, else by the method's original name.
    const name = key in handlers ? key : (method.originalName ?? key);
    const handler = handlers[name];
    if (method.requestStream || typeof handler !== 'function') continue;
    safeImplementation[name] = method.responseStream
      ? refusingInServerStream(handler as ServerStreamHandler)
      : refusingInUnary(handler as UnaryHandler);
  }
  return [safeDefinition as D, safeImplementation as I];
}
