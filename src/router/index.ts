/** The router process: its public face for the CLI, tests and benchmarks. */
export {
  startRouter,
  type GrpcJsCallTransport,
  type Router,
  type RouterOptions,
} from './router.js';
export { packageVersion } from './version.js';
export * from '../core/errors.js';
export { createLogger, type Logger } from './observability/index.js';
export {
  parseHostPort,
  servingSecurityOf,
  readPem,
  readWorkerCa,
  TokensFileError,
  type CredentialsSummary,
  type RouterAuth,
  type ServingSecurity,
} from './security/index.js';
export { readCatalogueFile, parseCatalogue, type RevisedCatalogue } from './startup/index.js';
