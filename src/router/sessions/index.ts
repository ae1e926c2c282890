/** Session turn-taking (shell): waiting, with timeouts and cancellation, on the core's queue. */
export * from './session-turns.js';
