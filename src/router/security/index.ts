/** Transport security, credentials (who is calling) and access (what their credential allows). */
export * from './access-policy.js';
export * from './address.js';
export * from './auth.js';
export * from './credentials.js';
export * from './errors.js';
export * from './principal.js';
export * from './router-credentials.js';
export * from './tokens-file.js';
