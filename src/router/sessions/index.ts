/** Session turn-taking: the pure queue and the waiting shell around it. */
export * from './turn-queue.js';
export * from './session-turns.js';
