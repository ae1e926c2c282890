/** Connections to workers. */
export * from './worker-connections.js';
export * from './worker-diagnosis.js';
