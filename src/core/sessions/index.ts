/** Session turn bookkeeping: who holds each session's turn and who waits. */
export * from './turn-queue.js';
export * from './session-end.js';
