/**
 * Workers reached on the platform's HTTP/2: one session per worker address, made on first use and
 * shared by every call to that worker, over TLS when the router trusts a worker CA (the workers'
 * certificates must name the address's host) and in plaintext otherwise. Each call is one stream,
 * presenting the router's own token. Health probes stay on grpc-js (`src/router/workers/`).
 */
import {
  connect,
  constants,
  type ClientHttp2Session,
  type OutgoingHttpHeaders,
  type SecureClientSessionOptions,
} from 'node:http2';
import type { Metadata } from '@grpc/grpc-js';
import { ExecutionServiceService } from '../../proto/gen/readie/v1/execution.js';
import type { CallHeader } from '../../proto/gen/readie/v1/execution.js';
import { AUTHORIZATION } from '../../shared/bearer-token.js';
import type { WorkerEnd, WorkerEndEvents, WorkerLinks } from '../calls/call-ends.js';
import { packageVersion } from '../version.js';
import { timeoutHeader } from './grpc-headers.js';
import { H2WorkerEnd } from './h2-worker-end.js';

/**
 * Flow-control windows: a stream's several 1 MiB chunks, so a relayed payload never waits on a
 * window update, and the session's room for many such streams.
 */
const STREAM_WINDOW = 4 * 1024 * 1024;
const SESSION_WINDOW = 64 * 1024 * 1024;
/** Keepalive: a ping this often on a session; no answer within the timeout ends it. */
const KEEPALIVE_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;

const EXECUTE_PATH = ExecutionServiceService.execute.path;
const USER_AGENT = `readie-router/${packageVersion()}`;

interface Link {
  readonly session: ClientHttp2Session;
  /** Resolves once connected; rejects with what went wrong. */
  readonly connected: Promise<void>;
  readonly keepalive: NodeJS.Timeout;
}

/** The router's HTTP/2 sessions to workers, by address. */
export class H2WorkerLinks implements WorkerLinks {
  private readonly byAddress = new Map<string, Link>();

  constructor(
    /** PEM CA certificates to dial workers over TLS; plaintext without. */
    private readonly workerCa: Buffer | undefined,
    /** The router's token for workers, kept current by the credentials. */
    private readonly workerMetadata: Metadata,
    /** The router's clock, epoch ms: deadlines are read against it. */
    private readonly clock: () => number,
  ) {}

  dial(address: string, deadline: number): Promise<void> {
    const link = this.link(address);
    if (!link.session.connecting) return link.connected;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`could not connect to ${address}: not connected in time`)),
        Math.max(0, deadline - this.clock()),
      );
      link.connected.then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (error: Error) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  open(address: string, deadline: number, header: CallHeader, events: WorkerEndEvents): WorkerEnd {
    const timeoutMs = Math.max(1, deadline - this.clock());
    const headers: OutgoingHttpHeaders = {
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: EXECUTE_PATH,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      [constants.HTTP2_HEADER_TE]: 'trailers',
      'grpc-timeout': timeoutHeader(timeoutMs),
      'user-agent': USER_AGENT,
    };
    const token = this.workerMetadata.get(AUTHORIZATION)[0];
    if (token !== undefined) headers[AUTHORIZATION] = String(token);
    const stream = this.link(address).session.request(headers);
    const end = new H2WorkerEnd(stream, events, timeoutMs);
    end.send({ kind: 'header', header }, () => undefined);
    return end;
  }

  /** Closes the sessions of every address not in `inUse`. */
  retain(inUse: ReadonlySet<string>): void {
    for (const [address, link] of this.byAddress) {
      if (!inUse.has(address)) this.forget(address, link);
    }
  }

  /** Closes every session. */
  closeAll(): void {
    this.retain(new Set());
  }

  private forget(address: string, link: Link): void {
    if (this.byAddress.get(address) === link) this.byAddress.delete(address);
    clearInterval(link.keepalive);
    if (!link.session.destroyed) link.session.close();
  }

  /** The session to `address`; a closed or failed one is replaced by a new one, connecting now. */
  private link(address: string): Link {
    const known = this.byAddress.get(address);
    if (known && !known.session.destroyed && !known.session.closed) return known;
    if (known) this.forget(address, known);
    const tls = this.workerCa !== undefined;
    const options: SecureClientSessionOptions & { noDelay: boolean } = {
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false },
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      // An RPC's small frames go out at once (no Nagle delay behind an unacknowledged one); Node's
      // HTTP/2 session sets it too, this says so explicitly.
      noDelay: true,
      ...(tls ? { ca: this.workerCa, ALPNProtocols: ['h2'] } : {}),
    };
    const session = connect(`${tls ? 'https' : 'http'}://${address}`, options);
    const connected = new Promise<void>((resolve, reject) => {
      session.once('connect', () => {
        session.setLocalWindowSize(SESSION_WINDOW);
        resolve();
      });
      session.once('error', (error: Error) =>
        reject(
          new Error(
            `could not connect to ${address}: No connection established. Last error: ${error.message}`,
          ),
        ),
      );
      session.once('close', () =>
        reject(new Error(`could not connect to ${address}: the connection closed`)),
      );
    });
    connected.catch(() => undefined);
    session.on('error', () => undefined); // streams and `connected` tell their own
    session.on('goaway', () => this.forget(address, link));
    session.on('close', () => this.forget(address, link));
    const keepalive = setInterval(() => ping(session), KEEPALIVE_MS);
    keepalive.unref();
    session.unref();
    const link: Link = { session, connected, keepalive };
    this.byAddress.set(address, link);
    return link;
  }
}

/** Pings `session`; one that does not answer in time is ended (its streams fail UNAVAILABLE). */
function ping(session: ClientHttp2Session): void {
  if (session.destroyed || session.connecting) return;
  const timer = setTimeout(() => session.destroy(), KEEPALIVE_TIMEOUT_MS);
  timer.unref();
  try {
    session.ping((error) => {
      clearTimeout(timer);
      if (error) session.destroy();
    });
  } catch {
    clearTimeout(timer);
    session.destroy();
  }
}
