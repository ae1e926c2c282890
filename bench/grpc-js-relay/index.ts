/**
 * The router's first call relay, on grpc-js: `ProxyService` served by the router's grpc-js
 * server, workers reached through its grpc-js channels. The product relays on the platform's
 * HTTP/2 (`src/router/wire/`); this one is kept as a benchmark baseline and as the second shell
 * the transport tests drive the same call machine through (`RouterOptions.relay`).
 */
import type { GrpcJsCallTransport } from '../../src/router/index.js';
import { RelayProxyService } from '../../src/router/calls/relay-codec.js';
import { GrpcJsWorkerLinks } from './grpc-js-ends.js';
import { proxyService } from './proxy-service.js';

/** The grpc-js relay, for `RouterOptions.relay`. */
export const grpcJsRelay: GrpcJsCallTransport = {
  service: (callPath, credentials) => [RelayProxyService, proxyService(callPath, credentials)],
  workerLinks: (connections, workerMetadata) => new GrpcJsWorkerLinks(connections, workerMetadata),
};
