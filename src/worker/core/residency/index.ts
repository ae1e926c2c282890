/** The worker's versions as a value, and the resident budget's eviction plan. */
export * from './eviction-plan.js';
export * from './versions.js';
