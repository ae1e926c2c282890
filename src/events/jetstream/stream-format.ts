/**
 * How a JetStream log lays events into a stream. One message is one append (one decision's
 * events, so a decision lands whole or not at all): its body is the events' exact JSON texts, one
 * a line, and its `Readie-Seq` header says `FIRST-LAST`, the seqs it holds. `Snapshot` events go to
 * their own subject, so the newest is one "last message by subject" away; a snapshot larger than
 * the server's message limit is kept in the stream's object store bucket and its message carries
 * `Readie-Object`, the object's name. `LogSegmentArchived` events go to a third subject, so the
 * newest archive is one request away too. The stream's description records the schema version,
 * the seq offset fixed when the stream was created (its first event's seq is `seqOffset + 1`) and,
 * once known, the log's origin (its first event, which the stream's limits may drop later).
 */
import { EventLogError } from '../errors.js';
import type { LogOrigin } from '../event-log.js';
import { EVENT_SCHEMA_VERSION } from '../schema.js';

/** The header naming the seqs a message holds. */
export const SEQ_HEADER = 'Readie-Seq';
/** The header naming the object that holds a snapshot too large for a message. */
export const OBJECT_HEADER = 'Readie-Object';

/** The subjects and buckets of one stream. */
export interface StreamNames {
  readonly stream: string;
  readonly eventsSubject: string;
  readonly snapshotsSubject: string;
  /** The subject of `LogSegmentArchived` events. */
  readonly archivedSubject: string;
  /** The object store bucket for large snapshots. */
  readonly snapshotBucket: string;
  /** The key-value bucket holding the leader's lease. */
  readonly leaseBucket: string;
}

/** The names derived from a stream's name. */
export function streamNames(stream: string): StreamNames {
  return {
    stream,
    eventsSubject: `readie.${stream}.events`,
    snapshotsSubject: `readie.${stream}.snapshots`,
    archivedSubject: `readie.${stream}.archived`,
    snapshotBucket: `${stream}-snapshots`,
    leaseBucket: `${stream}-leader`,
  };
}

/** What a stream's description records. */
export interface StreamRecord {
  readonly schemaVersion: number;
  readonly seqOffset: number;
  /** Which log this is (absent in streams created before origins were recorded, until recorded). */
  readonly origin?: LogOrigin;
}

const DESCRIPTION_PREFIX = 'readie event log ';

/** The description a new stream is created with. */
export function describeStream(record: StreamRecord): string {
  return `${DESCRIPTION_PREFIX}${JSON.stringify(record)}`;
}

/** Reads a stream's description back; a stream readie did not create is refused. */
export function readStreamRecord(stream: string, description: string | undefined): StreamRecord {
  const text = description ?? '';
  if (!text.startsWith(DESCRIPTION_PREFIX)) {
    throw new EventLogError(
      `stream ${stream} is not a readie event log (its description does not say so): name another stream`,
    );
  }
  try {
    const record = JSON.parse(text.slice(DESCRIPTION_PREFIX.length)) as Partial<StreamRecord>;
    if (Number.isInteger(record.schemaVersion) && Number.isInteger(record.seqOffset)) {
      return {
        schemaVersion: Number(record.schemaVersion),
        seqOffset: Number(record.seqOffset),
        ...(isOrigin(record.origin) ? { origin: record.origin } : {}),
      };
    }
  } catch {
    // Refused below.
  }
  throw new EventLogError(`stream ${stream}: its description "${text}" is not readable`);
}

function isOrigin(value: unknown): value is LogOrigin {
  const origin = value as Partial<LogOrigin> | undefined;
  return (
    typeof origin === 'object' &&
    origin !== null &&
    (origin.id === null || typeof origin.id === 'string') &&
    Number.isInteger(origin.seq) &&
    typeof origin.at === 'string' &&
    (origin.routerId === null || typeof origin.routerId === 'string') &&
    (origin.stream === null || typeof origin.stream === 'string')
  );
}

/** The seq range header of a message holding `first`..`last`. */
export function formatSeqRange(first: number, last: number): string {
  return `${first}-${last}`;
}

/** Parses a `Readie-Seq` header; throws naming the stream sequence of a bad one. */
export function parseSeqRange(
  header: string | undefined,
  streamSeq: number,
): { first: number; last: number } {
  const match = /^(\d+)-(\d+)$/.exec(header ?? '');
  const first = Number(match?.[1]);
  const last = Number(match?.[2]);
  if (!match || last < first) {
    throw new EventLogError(
      `stream message ${streamSeq} has no valid ${SEQ_HEADER} header (${header ?? 'none'}): the stream holds a message readie did not write`,
    );
  }
  return { first, last };
}

/** The schema version a new stream records. */
export const STREAM_SCHEMA_VERSION = EVENT_SCHEMA_VERSION;
