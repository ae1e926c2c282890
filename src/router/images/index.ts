/** Tenants' images as the router shows and removes them: asked of the workers that hold them. */
export * from './image-errors.js';
export * from './image-fanout.js';
export * from './image-handlers.js';
export * from './image-requests.js';
