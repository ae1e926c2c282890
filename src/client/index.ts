/**
 * The TypeScript client of readie: call Python functions on a cluster, by module or by source,
 * with JSON arguments (payload format `json-call`). See docs/clients.md.
 */
export {
  ReadieClient,
  Session,
  type CallOptions,
  type CallOutput,
  type CallsFilter,
  type LogsOptions,
  type ReadieClientOptions,
} from './client.js';
export type { CallAttemptView, CallView, OutputLine } from '../proto/gen/readie/v1/history.js';
export type { HeldImageView } from '../proto/gen/readie/v1/images.js';
export { RemoteCall, type LogLineSource, type RemoteLogLine } from './remote-call.js';
export type { CallInfo } from './call-info.js';
export type { CallDemandOptions, ImageOptions } from './call-config.js';
export type { Connection, ConnectionOptions } from './connection.js';
export type { ModuleFunction, PythonCall, SourceFunction } from './json-call.js';
export { MAX_CHUNK_BYTES as CHUNK_SIZE } from '../shared/chunks.js';
export { InputEncodingError } from './batches.js';
export {
  AuthenticationError,
  CallCancelledError,
  ClusterUnavailableError,
  ConfigurationError,
  ConflictError,
  errorFromStatus,
  InternalServerError,
  InvalidRequestError,
  NeverFitsError,
  PermissionDeniedError,
  PreconditionError,
  ProtocolError,
  ReadieError,
  RemoteExecutionError,
  RemoteOutOfMemoryError,
  RemoteTimeoutError,
  ResourceExhaustedError,
  NotFoundError,
  SessionExpiredError,
  ShedError,
  UnsupportedError,
  type RemoteException,
} from './errors.js';
