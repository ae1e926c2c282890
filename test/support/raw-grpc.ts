/**
 * A gRPC client that sends bytes as they are, for tests of what a server does with messages that
 * are not valid protobuf of their type: unary calls and whole request streams.
 */
import {
  credentials,
  makeGenericClientConstructor,
  Metadata,
  type Client,
  type ClientDuplexStream,
  type ServiceError,
} from '@grpc/grpc-js';

/** How a raw call ended. */
export interface RawOutcome {
  readonly code: number;
  readonly details: string;
}

const identity = (bytes: Buffer) => bytes;

function method(path: string, stream: boolean) {
  return {
    path,
    requestStream: stream,
    responseStream: stream,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}

interface RawClient extends Client {
  call(request: Buffer, metadata: Metadata, callback: (error: ServiceError | null) => void): void;
}

interface RawStreamClient extends Client {
  call(metadata: Metadata): ClientDuplexStream<Buffer, Buffer>;
}

/** Sends `messages` to `path` on `address` (a stream when `stream`, else one unary request). */
export async function sendRaw(
  address: string,
  path: string,
  messages: readonly Buffer[],
  { stream = false, metadata = new Metadata() }: { stream?: boolean; metadata?: Metadata } = {},
): Promise<RawOutcome> {
  const Raw = makeGenericClientConstructor({ call: method(path, stream) }, 'raw');
  const client = new Raw(address, credentials.createInsecure());
  try {
    if (!stream) {
      return await new Promise((resolve) =>
        (client as unknown as RawClient).call(messages[0] ?? Buffer.alloc(0), metadata, (error) =>
          resolve({ code: error?.code ?? 0, details: error?.details ?? '' }),
        ),
      );
    }
    const call = (client as unknown as RawStreamClient).call(metadata);
    return await new Promise((resolve) => {
      call.on('data', () => undefined);
      call.on('error', () => undefined);
      call.on('status', (status: { code: number; details: string }) =>
        resolve({ code: status.code, details: status.details }),
      );
      for (const message of messages) call.write(message);
      call.end();
    });
  } finally {
    client.close();
  }
}

/** A seeded generator of byte strings (xorshift32), so a failing case can be replayed. */
export function seededBytes(seed: number): (length: number) => Buffer {
  let state = seed >>> 0 || 1;
  return (length) => {
    const bytes = Buffer.alloc(length);
    for (let index = 0; index < length; index += 1) {
      state ^= state << 13;
      state >>>= 0;
      state ^= state >>> 17;
      state ^= state << 5;
      state >>>= 0;
      bytes[index] = state & 0xff;
    }
    return bytes;
  };
}
