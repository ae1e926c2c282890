/** Leadership of a replicated log: the lease, and the standby's refusal of calls. */
export * from './leader-lease.js';
export * from './standby-interceptor.js';
