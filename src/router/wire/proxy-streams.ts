/**
 * `ProxyService.RequestExecution` on the platform's HTTP/2 (shell): each stream is checked as a
 * gRPC server checks one (content type, `grpc-timeout`), its caller's credential authorized (the
 * same rules and refusals as the interceptor in front of the grpc-js services), held to the
 * connection's and the tenant's stream limits (`call-stream-limits.ts`), then handed to a
 * `CallRelay` over an `H2ClientEnd`.
 */
import { Metadata, status } from '@grpc/grpc-js';
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { ProxyServiceService } from '../../proto/gen/readie/v1/proxy.js';
import { AUTHORIZATION } from '../../shared/bearer-token.js';
import { NOT_STARTED } from '../../shared/call-trailers.js';
import { trailerEntries } from '../../core/calls/answer-trailers.js';
import { statusOf } from '../../core/errors.js';
import { CallRelay, type CallPathOptions } from '../calls/call-relay.js';
import {
  PermissionDeniedError,
  tenantOf,
  UnauthenticatedError,
  type Refusal,
  type RouterCredentials,
} from '../security/index.js';
import { RESPONSE_HEADERS, statusTrailers, timeoutMsOf } from './grpc-headers.js';
import { CallStreamLimits, StreamLimitError, type StreamBudget } from './call-stream-limits.js';
import { dropTheRest, H2ClientEnd } from './h2-client-end.js';
import { standbyRefusal, type StandbyGate } from '../leadership/index.js';
import type { StreamHandler } from './front-server.js';

/** The method path the handler serves. */
export const PROXY_PATH = ProxyServiceService.requestExecution.path;

/** The handler of `RequestExecution` streams. */
export function proxyStreams(
  options: CallPathOptions,
  credentials: RouterCredentials,
  onRefused: (refusal: Refusal) => void,
  standby: StandbyGate,
): StreamHandler {
  const limits = new CallStreamLimits(options.config);
  const { FIRST_MESSAGE_TIMEOUT, STREAM_IDLE_TIMEOUT } = options.config;
  return (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    stream.on('error', () => undefined);
    if (!standby.serving()) {
      // A standby refuses before anything is sent, so nginx or the client moves to the next router.
      const refusal = standbyRefusal(standby);
      refuse(stream, STREAM_IDLE_TIMEOUT, status.UNAVAILABLE, refusal.details, refusal.trailers);
      return;
    }
    const contentType = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      stream.respond({ [constants.HTTP2_HEADER_STATUS]: 415 }, { endStream: true });
      return;
    }
    const timeoutMs = timeoutMsOf(headers['grpc-timeout']);
    if (Number.isNaN(timeoutMs)) {
      refuse(
        stream,
        STREAM_IDLE_TIMEOUT,
        status.INTERNAL,
        `Invalid grpc-timeout value "${String(headers['grpc-timeout'])}"`,
      );
      return;
    }
    let tenantId: string | null;
    try {
      tenantId = tenantOf(credentials.authorize(authorizationOf(headers), PROXY_PATH));
    } catch (error) {
      if (error instanceof UnauthenticatedError || error instanceof PermissionDeniedError) {
        onRefused({ path: PROXY_PATH, code: error.code, problem: error.message });
      }
      const { code, details } = statusOf(error);
      refuse(stream, STREAM_IDLE_TIMEOUT, status[code], details);
      return;
    }
    let budget: StreamBudget;
    try {
      budget = limits.open(stream.session ?? stream, tenantId);
    } catch (error) {
      if (!(error instanceof StreamLimitError)) throw error;
      refuse(stream, STREAM_IDLE_TIMEOUT, status.RESOURCE_EXHAUSTED, error.message);
      return;
    }
    const now = options.clock();
    const end = new H2ClientEnd(stream, now + timeoutMs, now, {
      budget,
      firstMessageMs: FIRST_MESSAGE_TIMEOUT,
      idleMs: STREAM_IDLE_TIMEOUT,
    });
    new CallRelay(options, end, tenantId).start();
  };
}

/** The caller's `authorization` metadata, as the credentials read it. */
function authorizationOf(headers: IncomingHttpHeaders): Metadata {
  const metadata = new Metadata();
  const value: string | string[] | undefined = headers[AUTHORIZATION];
  const values: readonly string[] = Array.isArray(value)
    ? value
    : value === undefined
      ? []
      : [value];
  for (const entry of values) metadata.add(AUTHORIZATION, entry);
  return metadata;
}

/** Refuses a stream before anything ran: a trailers-only answer marked `readie-not-started`. */
function refuse(
  stream: ServerHttp2Stream,
  /** How long the client may go on sending before the stream is reset. */
  graceMs: number,
  code: number,
  details: string,
  trailers = NOT_STARTED,
): void {
  stream.respond(
    { ...RESPONSE_HEADERS, ...statusTrailers(code, details, trailerEntries(trailers)) },
    { endStream: true },
  );
  dropTheRest(stream, graceMs);
}
