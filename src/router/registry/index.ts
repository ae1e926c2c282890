/** The registry (shell): `RegistryService`, turning worker reports into the core's events. */
export * from './registry-service.js';
