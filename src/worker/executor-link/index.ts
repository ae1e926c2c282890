/** The executor link: frames and connections to the executor in a container. */
export * from '../core/executor-link/frames.js';
export * from './connection.js';
export * from '../core/executor-link/messages.js';
