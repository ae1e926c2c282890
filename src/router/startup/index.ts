/** Starting over a log: the startup and recovery events, and the catalogue file. */
export * from './catalogue-file.js';
export * from './startup-events.js';
