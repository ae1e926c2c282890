/** The call path's pure parts: message checks, the call's events, the worker header. */
export * from './call-config.js';
export * from './call-effects.js';
export * from './call-fields.js';
export * from './call-machine.js';
export * from './call-phases.js';
export * from './call-steps.js';
export * from './dial-failure.js';
export * from './relay-messages.js';
export * from './worker-header.js';
