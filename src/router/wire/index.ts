/** The call path on the platform's HTTP/2: the router's port, its call streams, its worker links. */
export * from './call-stream-limits.js';
export * from './front-server.js';
export * from './grpc-frames.js';
export * from './grpc-headers.js';
export * from './grpc-js-streams.js';
export * from './h2-client-end.js';
export * from './h2-worker-end.js';
export * from './h2-worker-links.js';
export * from './proxy-streams.js';
