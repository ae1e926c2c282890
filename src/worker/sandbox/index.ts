/** The sandbox: cgroups, identities, policy, container specs, the executor's zygotes, egress. */
export * from './cgroup.js';
export * from '../core/sandbox/cgroup-mounts.js';
export * from '../core/sandbox/container-spec.js';
export * from './egress.js';
export * from '../core/sandbox/exit-cause.js';
export * from './identities.js';
export * from '../core/sandbox/sandbox-policy.js';
export * from './zygote.js';
