/** Tenants' images: building them once, keeping them on disk, listing and removing them. */
export * from './image-store.js';
export * from './image-files.js';
export * from './image-service.js';
export * from './held-images.js';
