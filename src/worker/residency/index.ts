/** The worker's versions: residency, the resident budget and its eviction order, the service. */
export * from './eviction-plan.js';
export * from './residency-service.js';
export * from './version-residency.js';
