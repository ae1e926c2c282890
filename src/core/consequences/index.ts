/** Causes and their consequence events (pure). */
export * from './consequences.js';
