/**
 * The TypeScript client of readie: call Python functions on a cluster, by module or by source,
 * with JSON arguments (payload format `json-call`). See docs/clients.md.
 */
export { ReadieClient, Session, type CallOptions, type ReadieClientOptions } from './client.js';
export { RemoteCall, type LogLineSource, type RemoteLogLine } from './remote-call.js';
export type { CallInfo } from './call-info.js';
export type { CallDemandOptions, ImageOptions } from './call-config.js';
export type { Connection, ConnectionOptions } from './connection.js';
export type { ModuleFunction, PythonCall, SourceFunction } from './json-call.js';
export { MAX_CHUNK_BYTES as CHUNK_SIZE } from '../shared/chunks.js';
export {
  AuthenticationError,
  CallCancelledError,
  ClusterUnavailableError,
  ConfigurationError,
  ConflictError,
  errorFromStatus,
  InternalServerError,
  InvalidRequestError,
  PermissionDeniedError,
  PreconditionError,
  ProtocolError,
  ReadieError,
  RemoteExecutionError,
  RemoteOutOfMemoryError,
  RemoteTimeoutError,
  ResourceExhaustedError,
  SessionExpiredError,
  ShedError,
  UnsupportedError,
  type RemoteException,
} from './errors.js';
