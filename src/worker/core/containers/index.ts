/**
 * The container pool's rules: slots, standbys (and how many demand asks for), idle expiry, and which
 * session owns a container.
 */
export * from './idle-expiry.js';
export * from './lifecycle.js';
export * from './ownership.js';
export * from './slots.js';
export * from './standbys.js';
export * from './standby-demand.js';
