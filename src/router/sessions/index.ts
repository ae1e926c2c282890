/** Sessions (shell): turn-taking on the core's queue, with timeouts and cancellation; ending one. */
export * from './session-turns.js';
export * from './session-end.js';
