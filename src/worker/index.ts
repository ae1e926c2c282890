/**
 * The worker: sandboxed containers, checkpoint restores, the executor link, package installs,
 * its gRPC ExecutionService and its reports to the router's RegistryService.
 */
export { Worker, type WorkerTuning } from './worker.js';
export {
  resolveWorkerOptions,
  advertisedAddress,
  WORKER_FLAGS,
  type WorkerOptions,
  type WorkerFlagValues,
  type TransportSecurity,
} from './options.js';
export { workerLogger } from './logger.js';
export * from './core/errors.js';
