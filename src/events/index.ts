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
export { EventLog, VALUE_FORMAT, type EventLogOptions, type LostCommit } from './lmdb/event-log.js';
export {
  JetStreamEventLog,
  LogFencedError,
  type JetStreamLogOptions,
  type StreamLimits,
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
export {
  ArchiveDirectory,
  type ArchiveEntry,
  type ArchiveSummary,
} from './archive/archive-directory.js';
export {
  ArchiveFile,
  ArchiveWriter,
  readArchiveHeader,
  type ArchiveWriteStep,
  type WrittenArchive,
} from './archive/archive-file.js';
export {
  ARCHIVE_MAGIC,
  archiveFileName,
  DamagedArchiveError,
  parseArchiveFileName,
  type ArchiveHeader,
} from './archive/archive-format.js';
export {
  LogArchiver,
  type ArchiveEvent,
  type ArchiveStep,
  type LogArchiverOptions,
  type PassReport,
  type RetentionPolicy,
} from './archive/log-archiver.js';
