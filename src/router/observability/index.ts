/** Logs and metrics of the router. */
export * from './logger.js';
export * from './metrics.js';
export * from './metrics-server.js';
