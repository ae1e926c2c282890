/**
 * The web server of `readie ui` (node:http): the dashboard's files, and a small JSON API that
 * asks the router's AdminService with the operator's credential (`/api/status`, `/api/calls`,
 * `/api/call/<request-id>`). Read-only: GET alone. It answers only requests addressed to the
 * address it serves (the Host header), so a web page elsewhere cannot reach it through a name
 * that resolves to loopback; its pages run no inline script (a Content-Security-Policy says so),
 * and every router string is set as text by the page, never as HTML.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { status as Status } from '@grpc/grpc-js';
import { ReadieError } from '../../client/errors.js';
import type {
  GetCallResponse,
  ListCallsResponse,
  StatusResponse,
} from '../../proto/gen/readie/v1/admin.js';
import type { PinStatusResponse } from '../../proto/gen/readie/v1/pins.js';
import type { HostPort } from '../../shared/host-port.js';
import { parseDuration, UnitParseError } from '../../shared/units.js';
import { assetText, isAsset, pageFile } from '../../ui/assets.js';
import type { AdminRouters } from '../admin-routers.js';

/** How long the router has to answer one of the page's questions. */
const ASK_TIMEOUT_MS = 10_000;

/** The headers every answer carries. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

/** A running `readie ui` server. */
export interface UiServer {
  /** `host:port` it serves on (the real port when 0 was asked for). */
  readonly address: string;
  close(): Promise<void>;
}

/** What the server needs. */
export interface UiServerOptions {
  readonly listen: HostPort;
  readonly routers: AdminRouters;
  /** How often the page asks again, in ms. */
  readonly refreshMs: number;
}

/** An answer to the page's API: a status code and a JSON body. */
class ApiAnswer {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

function send(response: ServerResponse, status: number, type: string, body: string): void {
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': type,
    'cache-control': 'no-store',
  });
  response.end(body);
}

function sendJson(response: ServerResponse, answer: ApiAnswer): void {
  send(response, answer.status, 'application/json; charset=utf-8', JSON.stringify(answer.body));
}

/** A router failure as the page's API answers it. */
function failure(error: unknown): ApiAnswer {
  if (!(error instanceof ReadieError)) throw error;
  const status =
    error.code === Status.NOT_FOUND
      ? 404
      : error.code === Status.INVALID_ARGUMENT
        ? 400
        : error.code === Status.PERMISSION_DENIED || error.code === Status.UNAUTHENTICATED
          ? 403
          : 502;
  return new ApiAnswer(status, { error: error.message, code: error.codeName });
}

/** `host:port`, an IPv6 host in brackets. */
function formatHostPort({ host, port }: HostPort): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The hosts a request may name: the bound address, and loopback's names for a loopback bind. */
function allowedHosts(listen: HostPort, port: number): Set<string> {
  const hosts = new Set([formatHostPort({ host: listen.host, port })]);
  for (const name of ['localhost', '127.0.0.1', '[::1]']) hosts.add(`${name}:${port}`);
  return hosts;
}

async function api(
  path: string,
  query: URLSearchParams,
  options: UiServerOptions,
): Promise<ApiAnswer> {
  const { routers } = options;
  try {
    if (path === '/api/status') {
      const { answer: status } = await routers.leader<StatusResponse>(
        (client, metadata, callOptions, callback) =>
          client.status({ includeExpiredSessions: false }, metadata, callOptions, callback),
        ASK_TIMEOUT_MS,
      );
      const pins = await routers
        .leader<PinStatusResponse>(
          (client, metadata, callOptions, callback) =>
            client.pinStatus({ tenantId: '' }, metadata, callOptions, callback),
          ASK_TIMEOUT_MS,
        )
        .then(
          ({ answer }) => answer,
          () => null,
        );
      return new ApiAnswer(200, { status, pins });
    }
    if (path === '/api/calls') {
      let sinceMs = 0;
      const since = query.get('since');
      if (since) {
        try {
          sinceMs = parseDuration(since);
        } catch (error) {
          if (error instanceof UnitParseError)
            return new ApiAnswer(400, { error: `since: ${error.message}` });
          throw error;
        }
      }
      const filter = {
        sinceMs,
        failed: query.get('failed') === '1',
        function: query.get('function') ?? '',
        limit: 200,
      };
      const { answer } = await routers.leader<ListCallsResponse>(
        (client, metadata, callOptions, callback) =>
          client.listCalls(
            { filter, tenantId: query.get('tenant') ?? '' },
            metadata,
            callOptions,
            callback,
          ),
        ASK_TIMEOUT_MS,
      );
      return new ApiAnswer(200, answer);
    }
    if (path.startsWith('/api/call/')) {
      const requestId = decodeURIComponent(path.slice('/api/call/'.length));
      const { answer } = await routers.leader<GetCallResponse>(
        (client, metadata, callOptions, callback) =>
          client.getCall({ requestId }, metadata, callOptions, callback),
        ASK_TIMEOUT_MS,
      );
      return new ApiAnswer(200, answer);
    }
    return new ApiAnswer(404, { error: `no such API: ${path}` });
  } catch (error) {
    return failure(error);
  }
}

/** Starts serving; resolves once it listens. */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  let hosts = new Set<string>();
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    if (!hosts.has(request.headers.host ?? '')) {
      send(
        response,
        421,
        'text/plain; charset=utf-8',
        'this server answers only at its own address\n',
      );
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      send(response, 405, 'text/plain; charset=utf-8', 'read-only: GET only\n');
      return;
    }
    const url = new URL(request.url ?? '/', 'http://ui.invalid');
    if (url.pathname === '/' || url.pathname === '/index.html') {
      const page = pageFile('index.html').replace(
        '<html lang="en">',
        `<html lang="en" data-refresh-ms="${Math.round(options.refreshMs)}">`,
      );
      send(response, 200, CONTENT_TYPES.html!, page);
      return;
    }
    if (url.pathname.startsWith('/assets/')) {
      const name = url.pathname.slice('/assets/'.length);
      if (!isAsset(name) || name === 'index.html') {
        send(response, 404, 'text/plain; charset=utf-8', 'not found\n');
        return;
      }
      const extension = name.split('.').at(-1) ?? '';
      send(response, 200, CONTENT_TYPES[extension] ?? 'text/plain; charset=utf-8', assetText(name));
      return;
    }
    if (url.pathname.startsWith('/api/')) {
      api(url.pathname, url.searchParams, options).then(
        (answer) => sendJson(response, answer),
        (error: unknown) =>
          sendJson(response, new ApiAnswer(500, { error: (error as Error).message })),
      );
      return;
    }
    send(response, 404, 'text/plain; charset=utf-8', 'not found\n');
  };
  const server: Server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listen.port, options.listen.host, () => resolve());
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : options.listen.port;
  hosts = allowedHosts(options.listen, port);
  return {
    address: formatHostPort({ host: options.listen.host, port }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
