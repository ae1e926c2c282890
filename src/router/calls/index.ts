/** The call path (shell): `ProxyService.RequestExecution` through the router to a worker. */
export * from './active-calls.js';
export * from './call-ends.js';
export * from './call-relay.js';
export * from './relay-codec.js';
