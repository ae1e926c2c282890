/** The sandbox: cgroups, identities, policy, container specs, the executor's zygotes, egress. */
export * from './cgroup.js';
export * from './cgroup-mounts.js';
export * from './container-spec.js';
export * from './egress.js';
export * from './exit-cause.js';
export * from './identities.js';
export * from './sandbox-policy.js';
export * from './zygote.js';
