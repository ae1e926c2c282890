/** Reporting to the router: registration's retries and which router reports go to. */
export * from './registration.js';
export * from './router-choice.js';
