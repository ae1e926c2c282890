/** The sandbox: memory cgroups, container specs, the executor's zygotes, exit causes. */
export * from './cgroup.js';
export * from './cgroup-mounts.js';
export * from './container-spec.js';
export * from './exit-cause.js';
export * from './zygote.js';
