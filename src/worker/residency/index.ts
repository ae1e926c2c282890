/** The worker's versions: residency, the resident budget and its eviction order, the service. */
export * from '../core/residency/eviction-plan.js';
export * from './residency-service.js';
export * from './version-residency.js';
