/** Worker reports as events. */
export * from './report-events.js';
