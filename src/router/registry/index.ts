/** The registry: worker reports as events. */
export * from './report-events.js';
export * from './registry-service.js';
