/**
 * Tenants' quotas (docs/quotas.md): the operator's quota changes. The table itself is folded by
 * the projections (`quota-state.ts`); admission reads it (weights, slot caps, queue caps).
 */
export * from './quota-changes.js';
export * from './quota-errors.js';
