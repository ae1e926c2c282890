/** The log's retention, as the core records it. */
export { decideArchiveRecord, type ArchiveRecord } from './archive-record.js';
