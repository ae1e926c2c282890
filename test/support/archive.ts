/**
 * Logs with a history for the retention tests: a clock that moves as the test says, a cluster of a
 * few workers reporting load and running calls, snapshots every few events (so there are
 * segments to archive), and the archiver wired to record its events as the router does (in the
 * log, with the `archive` cause).
 */
import {
  ArchiveDirectory,
  ArchiveFile,
  EVENT_SCHEMA_VERSION,
  LogArchiver,
  type ArchiveStep,
  type EventLogBackend,
  type LogArchiverOptions,
  type RetentionPolicy,
  type StoredEvent,
} from '../../src/events/index.js';
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ArchiveWriter, EventLog, type NewEvent } from '../../src/events/index.js';
import { clusterProjection, type ClusterState } from '../../src/projections/index.js';
import { simulatedLog } from '../../bench/simulated-log.js';
import { tempDir } from './temp.js';
import { finished, placed, registered, requested, utilization } from './events.js';

/** An hour, in ms. */
export const HOUR = 3_600_000;
/** A day, in ms. */
export const DAY = 24 * HOUR;

/** A clock the test moves. */
export interface TestClock {
  readonly now: () => number;
  advance(ms: number): void;
}

/** A clock starting at `start` (epoch ms). */
export function testClock(start = Date.UTC(2026, 10, 1)): TestClock {
  let now = start;
  return { now: () => now, advance: (ms) => (now += ms) };
}

/**
 * Appends `hours` hours of a small cluster's history, `perHour` appends an hour: each hour its
 * workers report load, and calls are placed and finish (the last one of the run still in flight
 * when `leaveInFlight`). Returns the request ID left in flight, if any.
 */
export async function appendHistory(
  log: EventLogBackend<ClusterState>,
  clock: TestClock,
  { hours, perHour = 6, workers = 3, leaveInFlight = false, prefix = 'r' }: HistoryShape,
): Promise<string | undefined> {
  if (log.lastSeq === 0 || log.firstSeq === undefined) {
    log.append(
      {
        type: 'RouterStarted',
        config: {},
        version: 'test',
        rulesVersion: 1,
        routerId: null,
        takeoverFrom: null,
        schemaVersion: EVENT_SCHEMA_VERSION,
      },
      'start',
    );
    for (let w = 0; w < workers; w += 1) log.append(registered(`w${w}`), `report:w${w}`);
  }
  let call = 0;
  let inFlight: string | undefined;
  for (let hour = 0; hour < hours; hour += 1) {
    for (let i = 0; i < perHour; i += 1) {
      clock.advance(HOUR / perHour);
      const workerId = `w${i % workers}`;
      log.append(utilization(workerId, { memoryUsed: (i + 1) * 1024 ** 2 }), `report:${workerId}`);
      const requestId = `${prefix}${hour}-${call++}`;
      log.append([requested(requestId), placed(requestId, workerId)], `call:${requestId}`);
      const last = leaveInFlight && hour === hours - 1 && i === perHour - 1;
      if (last) inFlight = requestId;
      else {
        log.append(finished(requestId), `end:${requestId}`);
      }
    }
  }
  await log.flushed();
  return inFlight;
}

/** The shape of a history `appendHistory` appends. */
export interface HistoryShape {
  readonly hours: number;
  readonly perHour?: number;
  readonly workers?: number;
  readonly leaveInFlight?: boolean;
  readonly prefix?: string;
}

/** An archiver over `log` recording in it, as the router does. */
export function archiverFor(
  log: EventLogBackend<ClusterState>,
  archiveDir: string,
  clock: TestClock,
  policy: Partial<RetentionPolicy>,
  extra: Partial<LogArchiverOptions> = {},
): LogArchiver {
  return new LogArchiver({
    log,
    archive: ArchiveDirectory.open(archiveDir, { create: true }),
    policy: { logRetentionMs: 0, logMaxBytes: 0, archiveRetentionMs: 0, ...policy },
    clock: clock.now,
    record: (event) => log.append(event, 'archive').durable,
    inFlightSince: () => {
      let oldest: string | undefined;
      for (const reservation of log.state.reservations.values()) {
        if (oldest === undefined || reservation.since < oldest) oldest = reservation.since;
      }
      return oldest;
    },
    fileEvents: 1,
    ...extra,
  });
}

/** Every event an archive directory holds, file after file (overlaps kept out), with its text. */
export async function archivedEvents(archiveDir: string): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (const entry of ArchiveDirectory.open(archiveDir).entries()) {
    const file = await ArchiveFile.open(entry.path);
    for await (const stored of file.readStored()) {
      if (out.length === 0 || stored.event.seq > (out.at(-1)?.event.seq ?? 0)) out.push(stored);
    }
  }
  return out;
}

/** Every event a log holds, with its text. */
export async function liveEvents(log: EventLogBackend<unknown>): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for await (const stored of log.readStored()) out.push(stored);
  return out;
}

/** The steps of an archive run, in order (what the crash tests stop at). */
export const ARCHIVE_STEPS: readonly ArchiveStep[] = [
  'chosen',
  'written',
  'synced',
  'verified',
  'renamed',
  'logged',
  'dropped',
];

/**
 * A router's log of a simulated cluster (every decision placement's own), appended a decision at a
 * time 20 s apart with snapshots every 500 events, its whole text exported, then the part older
 * than 12 hours archived.
 */
export async function archivedCluster(
  seed: number,
): Promise<{ log: string; archive: string; full: string }> {
  const dir = tempDir('archived-');
  const log = join(dir, 'log');
  const archive = join(dir, 'archive');
  const full = join(dir, 'full.jsonl');
  const clock = testClock();
  const writer = EventLog.open<ClusterState>(log, {
    projection: clusterProjection,
    clock: clock.now,
    snapshotEvery: 500,
  });
  let group: NewEvent[] = [];
  let cause: string | null = null;
  const flush = () => {
    if (group.length > 0) writer.append(group, cause);
    clock.advance(20_000);
    group = [];
  };
  for (const event of simulatedLog({ seed, events: 8_000, workers: 60 })) {
    const { seq: _seq, at: _at, cause: eventCause, ...fields } = event;
    if (eventCause !== cause) flush();
    cause = eventCause;
    group.push(fields);
  }
  flush();
  await writer.flushed();
  writeFileSync(full, [...writer.readStored()].map((s) => `${s.text}\n`).join(''));
  await archiverFor(
    writer,
    archive,
    clock,
    { logRetentionMs: 12 * HOUR },
    {
      fileEvents: 1_500,
    },
  ).pass();
  await writer.close();
  return { log, archive, full };
}

/**
 * A copy of `archive` whose file `index` is written again with `change` applied to each of its
 * events (the same range and origin, a checksum of its own): what a forged file that still reads
 * would hold. Throws when `change` changed nothing.
 */
export async function rewrittenArchive(
  archive: string,
  index: number,
  change: (event: StoredEvent['event']) => StoredEvent['event'],
): Promise<string> {
  const copy = join(tempDir('rewritten-'), 'archive');
  cpSync(archive, copy, { recursive: true });
  const entry = ArchiveDirectory.open(copy).entries()[index];
  if (!entry) throw new Error(`${archive} has no file ${index}`);
  const file = await ArchiveFile.open(entry.path);
  const writer = new ArchiveWriter(file.header.origin);
  let changed = 0;
  for await (const { event } of file.readStored()) {
    const written = change(event);
    if (written !== event) changed += 1;
    writer.add({ event: written } as StoredEvent);
  }
  if (changed === 0) throw new Error(`nothing in ${entry.file} was changed`);
  const written = await writer.write(tempDir('rewrite-'));
  cpSync(written.path, entry.path);
  return copy;
}
