/** Worker liveness decisions: what a failed probe means, and the reaper. */
export * from './probe-outcome.js';
export * from './reaper.js';
