/**
 * The router's port: one HTTP/2 server (TLS unless `--insecure`) that serves the call path
 * (`ProxyService.RequestExecution`) itself and hands every other stream to grpc-js
 * (`grpc-js-streams.ts`). A connection holds a bounded number of streams at once and is closed
 * once it has had no stream for `CONNECTION_IDLE_TIMEOUT`. Stopping closes the listener, then the
 * sessions: gracefully (running calls finish), or at once.
 */
import {
  constants,
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';
import type { ServingSecurity } from '../security/index.js';
import type { GrpcJsStreams } from './grpc-js-streams.js';

/** A stream the front serves itself. */
export type StreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

/** The window a call's stream grants: several 1 MiB chunks, so uploads never wait on updates. */
const STREAM_WINDOW = 4 * 1024 * 1024;
/** The window of a whole connection (many calls). */
const SESSION_WINDOW = 64 * 1024 * 1024;
/** How long a connection closed for idleness may take to go before it is cut. */
const IDLE_CLOSE_GRACE_MS = 5_000;
/** The TLS handshake's bound when no idle timeout bounds it (Node's default). */
const HANDSHAKE_TIMEOUT_MS = 120_000;
const MiB = 1024 * 1024;

/** What one client connection may hold (the settings of the same names; 0: no limit). */
export interface ConnectionBounds {
  readonly CONNECTION_IDLE_TIMEOUT: number;
  readonly FIRST_MESSAGE_TIMEOUT: number;
  readonly CONNECTION_MAX_STREAMS: number;
  readonly CONNECTION_MAX_BUFFERED: number;
}

/**
 * HTTP/2's own limits from the router's: streams of all services together at twice the call
 * streams a connection may hold (so the call limit answers with a status, and a client that
 * opens more waits at its end); session memory, which Node counts as the data a session queues
 * and the read buffers its streams still hold, at what that many streams and the buffered bytes
 * can legitimately take (past it Node refuses new streams, never running ones).
 */
function http2Limits(bounds: ConnectionBounds): {
  maxConcurrentStreams?: number;
  maxSessionMemory: number;
} {
  const streams = bounds.CONNECTION_MAX_STREAMS;
  if (streams === 0 || bounds.CONNECTION_MAX_BUFFERED === 0) {
    return streams === 0
      ? { maxSessionMemory: Number.MAX_SAFE_INTEGER }
      : { maxConcurrentStreams: 2 * streams, maxSessionMemory: Number.MAX_SAFE_INTEGER };
  }
  const bytes =
    bounds.CONNECTION_MAX_BUFFERED + 2 * streams * (STREAM_WINDOW + MiB) + SESSION_WINDOW;
  return { maxConcurrentStreams: 2 * streams, maxSessionMemory: Math.ceil(bytes / MiB) };
}

/** The router's listening HTTP/2 server. */
export class FrontServer {
  private readonly sessions = new Set<ServerHttp2Session>();

  private constructor(
    private readonly server: Http2Server | Http2SecureServer,
    /** The port it listens on. */
    readonly port: number,
  ) {}

  /** Listens on `host:port` (0: a free port); `handlers` by method path, the rest to grpc-js. */
  static listen(
    host: string,
    port: number,
    security: ServingSecurity,
    handlers: ReadonlyMap<string, StreamHandler>,
    grpcJs: GrpcJsStreams,
    bounds: ConnectionBounds,
  ): Promise<FrontServer> {
    const { maxConcurrentStreams, maxSessionMemory } = http2Limits(bounds);
    const idleMs = bounds.CONNECTION_IDLE_TIMEOUT;
    const options = {
      settings: {
        initialWindowSize: STREAM_WINDOW,
        enablePush: false,
        ...(maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams }),
      },
      maxSessionMemory,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    };
    const server =
      security.kind === 'tls'
        ? createSecureServer({
            ...options,
            cert: security.certChain,
            key: security.privateKey,
            ALPNProtocols: ['h2'],
            handshakeTimeout:
              idleMs > 0 ? Math.min(idleMs, HANDSHAKE_TIMEOUT_MS) : HANDSHAKE_TIMEOUT_MS,
          })
        : createServer(options);
    const sessions = new Set<ServerHttp2Session>();
    // Idleness is judged by streams, not bytes: keepalive pings do not keep a connection open.
    server.setTimeout(0);
    server.on('session', (session: ServerHttp2Session) => {
      sessions.add(session);
      if (idleMs > 0) closeWhenIdle(session, idleMs);
      session.once('close', () => sessions.delete(session));
      session.on('error', () => undefined);
      session.once('connect', () => session.setLocalWindowSize(SESSION_WINDOW));
      if (!session.connecting) session.setLocalWindowSize(SESSION_WINDOW);
      grpcJs.session(session);
    });
    server.on(
      'stream',
      (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
        const handler = handlers.get(String(headers[constants.HTTP2_HEADER_PATH]));
        if (handler) {
          handler(stream, headers);
          return;
        }
        if (bounds.FIRST_MESSAGE_TIMEOUT > 0) resetUnlessSent(stream, bounds.FIRST_MESSAGE_TIMEOUT);
        grpcJs.stream(stream, headers, flags);
      },
    );
    // An RPC's small frames go out at once (no Nagle delay behind an unacknowledged one). Node's
    // HTTP/2 session sets this on its socket too; said here so the router does not rely on it.
    server.on('connection', (socket: Socket) => socket.setNoDelay(true));
    // A client that fails its TLS handshake (or speaks plaintext to TLS) is its own problem.
    server.on('secureConnection', (socket: Socket) => socket.on('error', () => undefined));
    server.on('tlsClientError', () => undefined);
    server.on('sessionError', () => undefined);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port }, () => {
        server.removeListener('error', reject);
        const address = server.address();
        const front = new FrontServer(
          server,
          typeof address === 'object' && address !== null ? address.port : port,
        );
        for (const session of sessions) front.sessions.add(session);
        server.on('session', (session: ServerHttp2Session) => {
          front.sessions.add(session);
          session.once('close', () => front.sessions.delete(session));
        });
        resolve(front);
      });
    });
  }

  /** Stops accepting connections; open sessions go on until `closeSessions` or they end. */
  stopListening(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Asks every session to finish (GOAWAY: running streams go on, no new ones). */
  closeSessions(): void {
    for (const session of this.sessions) if (!session.closed) session.close();
  }

  /** Resolves once every session has closed. */
  drained(): Promise<void> {
    const open = [...this.sessions].filter((session) => !session.destroyed);
    return Promise.all(
      open.map((session) => new Promise<void>((resolve) => session.once('close', () => resolve()))),
    ).then(() => undefined);
  }

  /** Ends every session now. */
  destroySessions(): void {
    for (const session of this.sessions) session.destroy();
  }
}

/** Closes `session` (GOAWAY, then cut after a grace) once it has had no open stream for `idleMs`. */
function closeWhenIdle(session: ServerHttp2Session, idleMs: number): void {
  let open = 0;
  let timer: NodeJS.Timeout | undefined;
  const idle = () => {
    if (session.closed || session.destroyed) return;
    session.close();
    setTimeout(() => session.destroy(), IDLE_CLOSE_GRACE_MS).unref();
  };
  const arm = () => {
    timer = setTimeout(idle, idleMs);
    timer.unref();
  };
  session.on('stream', (stream: ServerHttp2Stream) => {
    open += 1;
    clearTimeout(timer);
    stream.once('close', () => {
      open -= 1;
      if (open === 0 && !session.closed) arm();
    });
  });
  session.once('close', () => clearTimeout(timer));
  arm();
}

/**
 * Every method grpc-js serves here takes one request message (unary, or health's `Watch`), so a
 * stream whose request has not ended within `ms` is a client holding the router's memory (up to
 * a 4 MiB message per stream, credential or not: health is open): it is reset (`CANCEL`).
 */
function resetUnlessSent(stream: ServerHttp2Stream, ms: number): void {
  const timer = setTimeout(() => {
    if (!stream.closed && !stream.readableEnded) stream.close(constants.NGHTTP2_CANCEL);
  }, ms);
  timer.unref();
  stream.once('end', () => clearTimeout(timer));
  stream.once('close', () => clearTimeout(timer));
}
