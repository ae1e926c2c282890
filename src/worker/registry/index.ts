/** Talking to the router's RegistryService. */
export * from './registry-client.js';
