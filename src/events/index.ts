/** The event vocabulary, its codecs and the event logs (LMDB, JetStream): the public face of `src/events`. */
export * from './catalogue.js';
export * from './cause.js';
export * from './decode.js';
export * from './errors.js';
export * from './event-log.js';
export * from './projection.js';
export * from './schema.js';
export * from './schema-errors.js';
export * from './stamp.js';
export * from './types.js';
export * from './upcast.js';
export { EventLog, type EventLogOptions } from './lmdb/event-log.js';
export {
  JetStreamEventLog,
  LogFencedError,
  type JetStreamLogOptions,
} from './jetstream/jetstream-log.js';
export {
  DEFAULT_CLUSTER_WAIT_MS,
  isClusterStarting,
  JetStreamUnavailableError,
  waitForCluster,
  type ClusterWaitOptions,
  type ClusterWaitReport,
} from './jetstream/cluster-wait.js';
export {
  formatJetStreamLocation,
  isJetStreamLocation,
  parseJetStreamLocation,
  type JetStreamLocation,
} from './jetstream/location.js';
export { openEventLog, type OpenLogOptions } from './open/open-log.js';
export { readJsonl, writeJsonl, type JsonlEvent } from './jsonl/jsonl.js';
