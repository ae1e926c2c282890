/** The router's log retention: the archiver on a timer, and what status and metrics show of it. */
export {
  ARCHIVE_PASS_INTERVAL_MS,
  defaultArchiveDir,
  LogRetention,
  type LogRetentionOptions,
} from './log-retention.js';
