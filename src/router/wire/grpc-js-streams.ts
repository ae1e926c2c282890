/**
 * Hands HTTP/2 sessions and streams the router's own server accepted to grpc-js, which serves
 * every service but the call path (registry, admin, tenant, health) with its interceptors, limits
 * and keepalive, on the same port and connections as the call path.
 *
 * grpc-js takes foreign connections only whole (`Server.createConnectionInjector`), and a client
 * sends its calls and its other requests on one connection, so streams are handed over one by
 * one: to the HTTP/2 server behind a connection injector, as its own sessions and streams. That
 * server is found among the grpc-js server's (a private field, checked here so a grpc-js that
 * changed fails at the router's start, loudly, never at a call).
 */
import type {
  Http2Server,
  IncomingHttpHeaders,
  ServerHttp2Session,
  ServerHttp2Stream,
} from 'node:http2';
import { ServerCredentials, type Server } from '@grpc/grpc-js';

/** Where the router's front hands what grpc-js serves. */
export interface GrpcJsStreams {
  /** A new session: grpc-js watches it (keepalive, shutdown). */
  session(session: ServerHttp2Session): void;
  /** A stream grpc-js serves. */
  stream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number): void;
}

interface ServerInternals {
  readonly http2Servers?: Map<Http2Server, unknown>;
}

/** A way into `server` for sessions and streams accepted elsewhere. */
export function grpcJsStreams(server: Server): GrpcJsStreams {
  const servers = (server as unknown as ServerInternals).http2Servers;
  if (!(servers instanceof Map)) {
    throw new Error(
      'this @grpc/grpc-js keeps no http2Servers map: the router cannot hand it streams ' +
        '(install the version package-lock.json names)',
    );
  }
  const before = new Set(servers.keys());
  server.createConnectionInjector(ServerCredentials.createInsecure());
  const inner = [...servers.keys()].find((candidate) => !before.has(candidate));
  if (inner === undefined || inner.listenerCount('stream') === 0) {
    throw new Error(
      'this @grpc/grpc-js made no HTTP/2 server for a connection injector: the router cannot ' +
        'hand it streams (install the version package-lock.json names)',
    );
  }
  return {
    session: (session) => inner.emit('session', session),
    stream: (stream, headers, flags) => inner.emit('stream', stream, headers, flags),
  };
}
