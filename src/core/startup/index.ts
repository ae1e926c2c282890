/** What the router appends when it starts over a log: its start, the catalogue, the recovery. */
export * from './startup-events.js';
