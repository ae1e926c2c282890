/** Transport security and bearer-token authentication. */
export * from './address.js';
export * from './auth.js';
export * from './credentials.js';
