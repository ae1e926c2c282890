/**
 * The event log part of `readie status`: what the live log holds (its size, oldest seq and
 * event), what its archive holds (its files, size and range) and the retention in force. Pure.
 */
import type { LogView, StatusResponse } from '../../proto/gen/readie/v1/admin.js';
import { formatDuration } from '../../shared/units.js';
import { age, roughSize } from './readable-units.js';

function retention(log: LogView): string {
  const duration = (ms: number) => (ms === 0 ? 'none' : formatDuration(ms));
  return (
    `LOG_RETENTION ${duration(log.logRetentionMs)}, ` +
    `LOG_MAX_BYTES ${log.logMaxBytes === 0 ? 'none' : roughSize(log.logMaxBytes)}, ` +
    `ARCHIVE_RETENTION ${log.archiveRetentionMs === 0 ? 'keep all' : formatDuration(log.archiveRetentionMs)}`
  );
}

/** The live log, its archive and the retention, from the answer's `log`. */
export const logSection = {
  title: 'Event log',
  render(status: StatusResponse, now: number): string | null {
    const log = status.log;
    if (log === undefined) return null;
    const lines = [
      `live: ${log.location}, ${roughSize(log.liveBytes)}, seq ${log.firstSeq} to ${log.lastSeq}` +
        (log.firstAt === '' ? '' : `, oldest event ${age(log.firstAt, now)} ago (${log.firstAt})`),
    ];
    if (log.archiveDir === '') {
      lines.push(`archive: none (${log.archiveOff})`);
    } else if (log.archiveFiles === 0) {
      lines.push(`archive: ${log.archiveDir}, empty`);
    } else {
      lines.push(
        `archive: ${log.archiveDir}, ${log.archiveFiles} file${log.archiveFiles === 1 ? '' : 's'}, ` +
          `${roughSize(log.archiveBytes)}, seq ${log.archiveFirstSeq} to ${log.archiveLastSeq}, ` +
          `${log.archiveFirstAt} to ${log.archiveLastAt}`,
      );
    }
    lines.push(
      `retention: ${retention(log)}; last pass ${log.lastPassAt === '' ? 'not yet' : `${age(log.lastPassAt, now)} ago`}`,
    );
    if (log.archiveProblem !== '') lines.push(`last pass failed: ${log.archiveProblem}`);
    return lines.join('\n');
  },
};
