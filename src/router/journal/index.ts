/** The router's handle on its event log. */
export * from './journal.js';
