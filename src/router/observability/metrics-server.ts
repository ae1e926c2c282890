/** Serves the router's metrics over HTTP: `GET /metrics` in the Prometheus text format. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { formatHostPort, type HostPort } from '../security/address.js';

/** A running metrics endpoint. */
export interface MetricsServer {
  /** `host:port` it listens on (the real port when 0 was asked for). */
  readonly address: string;
  close(): Promise<void>;
}

/** Listens on `listen` and answers `GET /metrics` from `registry`; 404 for anything else. */
export async function serveMetrics(listen: HostPort, registry: Registry): Promise<MetricsServer> {
  const { host, port } = listen;
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('not found: try GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (error: Error) => response.writeHead(500).end(`metrics failed: ${error.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    address: formatHostPort({ host, port: bound.port }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
