/** Containers: the pool a worker holds, and each container's record. */
export * from './container.js';
export * from './container-ids.js';
export * from './container-factory.js';
export * from './container-pool.js';
export * from './standby-shelf.js';
