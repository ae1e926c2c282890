/** The call path: `ProxyService.RequestExecution` through the router to a worker. */
export * from './active-calls.js';
export * from './call-config.js';
export * from './call-relay.js';
export * from './proxy-service.js';
export * from './relay-codec.js';
export * from './relay-messages.js';
export * from './worker-header.js';
