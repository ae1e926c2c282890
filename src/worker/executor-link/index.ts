/** The executor link: frames and connections to the executor in a container. */
export * from './frames.js';
export * from './connection.js';
export * from './messages.js';
