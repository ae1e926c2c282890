/**
 * A hostile client of the router's call path on bare `node:http2`: `RequestExecution` streams
 * opened by hand, so a test can send half a message, nothing at all, or never end, and read the
 * status the router answers with (trailers-only or in trailers).
 */
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
} from 'node:http2';
import { decodeGrpcMessage } from '../../../src/router/wire/index.js';
import { ProxyServiceService } from '../../../src/proto/gen/readie/v1/proxy.js';

/** How a raw stream ended: the gRPC status, or `reset` when it was cut without one. */
export interface RawStatus {
  readonly code: number | 'reset';
  readonly details: string;
}

/** A raw call stream and the status it will end with. */
export interface RawCall {
  readonly stream: ClientHttp2Stream;
  readonly status: Promise<RawStatus>;
}

/** A connection to `address` (`host:port`), plaintext; errors are the test's to read, not throw. */
export function rawSession(address: string): ClientHttp2Session {
  const session = connect(`http://${address}`, { settings: { initialWindowSize: 8 << 20 } });
  session.on('error', () => undefined);
  return session;
}

/** Opens a `RequestExecution` stream on `session` with `token` as its bearer token. */
export function openRawCall(session: ClientHttp2Session, token?: string): RawCall {
  const stream = session.request({
    [constants.HTTP2_HEADER_METHOD]: 'POST',
    [constants.HTTP2_HEADER_PATH]: ProxyServiceService.requestExecution.path,
    [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
    te: 'trailers',
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
  });
  stream.on('error', () => undefined);
  const status = new Promise<RawStatus>((resolve) => {
    const done = (headers: IncomingHttpHeaders): boolean => {
      const code = headers['grpc-status'];
      if (code === undefined) return false;
      resolve({
        code: Number(code),
        details: decodeGrpcMessage(headers['grpc-message']),
      });
      return true;
    };
    stream.on('response', (headers) => done(headers));
    stream.on('trailers', (headers: IncomingHttpHeaders) => done(headers));
    stream.on('data', () => undefined);
    stream.on('close', () => resolve({ code: 'reset', details: `rst ${stream.rstCode}` }));
  });
  return { stream, status };
}

/** The 5-byte gRPC prefix of an uncompressed message of `length` bytes. */
export function messagePrefix(length: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

/**
 * Writes the prefix and the first `sent` bytes of a message that claims `length` bytes; resolves
 * once they left for the socket.
 */
export function sendPartialMessage(
  stream: ClientHttp2Stream,
  length: number,
  sent: number,
): Promise<void> {
  return new Promise((resolve) =>
    stream.write(Buffer.concat([messagePrefix(length), Buffer.alloc(sent, 0x61)]), () => resolve()),
  );
}

/**
 * Resolves once the server answered a PING sent now: it has read every frame sent before (a
 * server reads a connection's frames in order and answers a PING after those before it).
 */
export async function roundTrip(session: ClientHttp2Session): Promise<void> {
  if (session.connecting) await new Promise((resolve) => session.once('connect', resolve));
  return new Promise((resolve, reject) =>
    session.ping((error) => (error ? reject(error) : resolve())),
  );
}

/** Resolves with `promise`'s value, or `timedOut` if it takes longer than `ms`. */
export function within<T, U>(promise: Promise<T>, ms: number, timedOut: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<U>((resolve) => (timer = setTimeout(() => resolve(timedOut), ms))),
  ]);
}
