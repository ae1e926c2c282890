/** Connections to workers. */
export * from './worker-connections.js';
