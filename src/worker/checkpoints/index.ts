/** Checkpoints: the catalogue, and the backends that restore containers from checkpoints. */
export * from './catalogue.js';
export * from './restore-backend.js';
export * from './template-backend.js';
export * from './criu-backend.js';
