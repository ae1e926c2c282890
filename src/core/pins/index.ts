/**
 * Tenants' pin table and what follows from it (docs/tenant-routing.md): the operator's pin
 * changes, the versions the router keeps where and tells workers to keep, workers' residency
 * reports, and the fleet's resident budget. Placing a pinned call is placement's
 * (`core/placement/pinned/`).
 */
export * from './kept-versions.js';
export * from './pin-changes.js';
export * from './pin-errors.js';
export * from './protection.js';
export * from './residency-report.js';
export * from './resident-budget.js';
