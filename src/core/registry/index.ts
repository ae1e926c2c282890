/** Worker reports as events. */
export * from './report-events.js';
export * from './image-report.js';
export * from './held-images-report.js';
