/** Images: their names, the cache's bookkeeping. */
export * from './image-identity.js';
export * from './image-cache.js';
export * from './image-commands.js';
export * from './held-images.js';
