/** Tenant-pinned versions: resolution, rendezvous subsets, pinned placement, pin changes. */
export * from './rendezvous.js';
export * from './resolution.js';
export * from './retry-check.js';
export * from './routing-explanation.js';
export * from './subset-cache.js';
export * from './version-flavor.js';
export * from './pinned-subset.js';
export { decidePinned, describeResolution, type PinnedContext } from './place-pinned.js';
export * from './kept-versions.js';
export * from './pin-changes.js';
export * from './pin-errors.js';
export * from './protection.js';
export * from './residency-report.js';
export * from './resident-budget.js';
