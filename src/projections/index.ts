/** Pure folds of the event log into cluster state, and read-only queries over it. */
export * from './admission-index.js';
export * from './cluster-state.js';
export * from './evolve.js';
export * from './fold.js';
export * from './queries.js';
export * from './reconcile.js';
export * from './quota-state.js';
export * from './routing-state.js';
export * from './snapshot.js';
export * from './worker-changes.js';
export * from './call-history.js';
export * from './call-view.js';
export * from './rules-steps.js';
