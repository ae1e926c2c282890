/** Checkpoints: the catalogue, and the backends that restore containers from checkpoints. */
export * from './catalogue.js';
export * from './restore-backend.js';
export * from './template-backend.js';
export * from './criu-backend.js';
export * from './criu-binary.js';
export * from './criu-image.js';
export * from '../core/checkpoints/tiers.js';
