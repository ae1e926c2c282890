/**
 * The log's retention: moving old segments (a snapshot and the events up to the next one) out of
 * the live log into archive files, and deleting archive files past their own retention. One pass
 * (`pass`) does what is due, in seq order, each step crash safe:
 *
 *   chosen -> written -> synced -> verified -> renamed -> logged -> dropped
 *
 * A file takes its name only once verified (`archive-file.ts`); the `LogSegmentArchived` that
 * records it is appended (durably) only after that; the live events are removed only after that
 * (LMDB; a JetStream stream drops them by its own limits). A process killed between any two steps
 * leaves the segment in the live log or in a verified file, never neither, and the next pass
 * finishes the sequence: it adopts a verified file nobody logged, logs it once (the log's
 * `archivedThrough` says what is logged), and removes what is logged but still live.
 *
 * Never archived: the newest snapshot and what follows it (what a start folds), and, on LMDB,
 * anything at or after the oldest call still in flight.
 */
import { createHash } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { EventLogError } from '../errors.js';
import type { EventLogBackend, LogOrigin } from '../event-log.js';
import type { ArchiveReason } from '../schema.js';
import type { NewEventOf, StoredEvent } from '../types.js';
import type { ArchiveDirectory, ArchiveEntry } from './archive-directory.js';
import {
  ArchiveFile,
  ArchiveWriter,
  readArchiveHeader,
  type ArchiveWriteStep,
} from './archive-file.js';

/** What the router keeps live and archived (its settings, in ms and bytes). */
export interface RetentionPolicy {
  /** Segments whose last event is older than this are archived; 0: never for their age. */
  readonly logRetentionMs: number;
  /** While the live log holds more bytes than this, its oldest segments are archived; 0: no bound. */
  readonly logMaxBytes: number;
  /** Archive files whose last event is older than this are deleted; 0: kept forever. */
  readonly archiveRetentionMs: number;
}

/** The steps of archiving a run of segments, and of expiring a file. */
export type ArchiveStep = 'chosen' | ArchiveWriteStep | 'logged' | 'dropped' | 'expired';

/** What the archiver records in the log. */
export type ArchiveEvent = NewEventOf<'LogSegmentArchived'> | NewEventOf<'LogArchiveExpired'>;

/** How to run the retention of one log. */
export interface LogArchiverOptions {
  readonly log: EventLogBackend<unknown>;
  readonly archive: ArchiveDirectory;
  readonly policy: RetentionPolicy;
  /** The clock ages are measured by (epoch ms). */
  readonly clock: () => number;
  /**
   * Appends the event (the router: as a core decision, through its journal) and resolves once
   * it is durable.
   */
  readonly record: (event: ArchiveEvent) => Promise<unknown>;
  /** The instant the oldest call still in flight was placed, if any (LMDB keeps it live). */
  readonly inFlightSince?: () => string | undefined;
  /** Each step done, with the seq range it concerns (a crash test stops the process at one). */
  readonly onStep?: (step: ArchiveStep, range: { fromSeq: number; toSeq: number }) => void;
  /** Told when a range was dropped by a JetStream stream's limits before it was archived. */
  readonly onLost?: (range: { fromSeq: number; toSeq: number }) => void;
  /** A file is closed at the first segment boundary past this many events. Default 1,000,000. */
  readonly fileEvents?: number;
}

/** What one pass did. */
export interface PassReport {
  readonly archived: readonly ArchiveEvent[];
  readonly expired: number;
}

/** Events read between two turns of the event loop (the router keeps serving while archiving). */
const EVENTS_PER_TURN = 5_000;

/** Runs a log's retention, one pass at a time. */
export class LogArchiver {
  private checkedOrigin: LogOrigin | undefined;
  private running: Promise<PassReport> | undefined;

  constructor(private readonly options: LogArchiverOptions) {}

  private get lmdb(): boolean {
    return this.options.log.kind === 'lmdb';
  }

  /** Runs one pass (a pass already running is joined, not doubled). */
  pass(): Promise<PassReport> {
    this.running ??= this.passOnce().finally(() => (this.running = undefined));
    return this.running;
  }

  private async passOnce(): Promise<PassReport> {
    const { log, archive } = this.options;
    const origin = await log.origin();
    if (origin === undefined) return { archived: [], expired: 0 };
    if (this.checkedOrigin === undefined) {
      await archive.checkOrigin(origin);
      archive.removeLeftovers();
      this.checkedOrigin = origin;
    }
    const archived: ArchiveEvent[] = [];
    await this.dropLogged();
    for (;;) {
      const run = await this.nextRun(origin);
      if (run === undefined) break;
      archived.push(await this.archiveRun(origin, run));
    }
    return { archived, expired: await this.expire() };
  }

  /** LMDB: removes what the log says is archived but is still live (a crash came between). */
  private async dropLogged(): Promise<void> {
    const { log } = this.options;
    const through = await log.archivedThrough();
    const first = log.firstSeq;
    if (!this.lmdb || through === undefined || first === undefined || through < first) return;
    this.checkCovered(first, through);
    await log.dropThrough(through);
    this.options.onStep?.('dropped', { fromSeq: first, toSeq: through });
  }

  /** Refuses to remove live events that no archive file holds. */
  private checkCovered(fromSeq: number, toSeq: number): void {
    let next = fromSeq;
    for (const entry of this.options.archive.entries()) {
      if (entry.toSeq < next) continue;
      if (entry.fromSeq > next) break;
      next = entry.toSeq + 1;
      if (next > toSeq) return;
    }
    throw new EventLogError(
      `retention: seq ${next} to ${toSeq} are logged as archived but no file in ${this.options.archive.dir} holds them: nothing is removed from the live log`,
    );
  }

  /**
   * The next run of whole segments to archive, and why: from the first event not yet archived
   * to a snapshot boundary, whole segments that are due, closed at the first boundary past the
   * file size. Undefined when nothing is due.
   */
  private async nextRun(
    origin: LogOrigin,
  ): Promise<{ fromSeq: number; toSeq: number; reason: ArchiveReason } | undefined> {
    const { log } = this.options;
    const first = log.firstSeq;
    const newest = await log.snapshotAtOrBefore();
    if (first === undefined || newest === undefined) return undefined;
    const through = await log.archivedThrough();
    let start = through === undefined ? Math.max(first, origin.seq) : through + 1;
    if (start < first) {
      // A JetStream stream's limits dropped events nobody archived: start again at a snapshot.
      const [resume] = await log.snapshotsBetween(first, newest);
      this.options.onLost?.({ fromSeq: start, toSeq: (resume ?? newest) - 1 });
      start = resume ?? newest;
    }
    if (start >= newest) return undefined;
    const boundaries = [...(await log.snapshotsBetween(start + 1, newest)), newest];
    const limit = this.options.fileEvents ?? 1_000_000;
    let toSeq: number | undefined;
    let reason: ArchiveReason | undefined;
    for (const boundary of boundaries) {
      const due = await this.due(boundary - 1);
      if (due === undefined) break;
      toSeq = boundary - 1;
      reason ??= due;
      if (toSeq - start + 1 >= limit) break;
    }
    // On JetStream every closed segment is archived, but into files of the full size unless
    // the oldest is getting near the stream's age limit.
    if (!this.lmdb && toSeq !== undefined && toSeq - start + 1 < limit) {
      const old = await this.olderThan(toSeq, this.options.policy.logRetentionMs / 2);
      if (!old) return undefined;
    }
    return toSeq === undefined || reason === undefined
      ? undefined
      : { fromSeq: start, toSeq, reason };
  }

  /** Why the segment ending at `endSeq` is due for the archive, or undefined when it is not. */
  private async due(endSeq: number): Promise<ArchiveReason | undefined> {
    const { policy } = this.options;
    if (!this.lmdb) return 'stream-limits';
    const [end] = await all(this.options.log.read(endSeq, endSeq));
    if (end === undefined) return undefined;
    const inFlight = this.options.inFlightSince?.();
    if (inFlight !== undefined && end.at >= inFlight) return undefined;
    const age = this.options.clock() - Date.parse(end.at);
    if (policy.logRetentionMs > 0 && age >= policy.logRetentionMs) return 'retention';
    if (policy.logMaxBytes > 0 && (await this.options.log.liveBytes()) > policy.logMaxBytes) {
      return 'size';
    }
    return undefined;
  }

  private async olderThan(seq: number, ms: number): Promise<boolean> {
    if (ms <= 0) return false;
    const [event] = await all(this.options.log.read(seq, seq));
    return event !== undefined && this.options.clock() - Date.parse(event.at) >= ms;
  }

  /** Archives one run: adopts a verified file a crash left unlogged, else writes it; logs; drops. */
  private async archiveRun(
    origin: LogOrigin,
    run: { fromSeq: number; toSeq: number; reason: ArchiveReason },
  ): Promise<ArchiveEvent> {
    const { log, onStep } = this.options;
    onStep?.('chosen', { fromSeq: run.fromSeq, toSeq: run.toSeq });
    const event = (await this.adopt(run)) ?? (await this.write(origin, run));
    const range = { fromSeq: event.fromSeq, toSeq: event.toSeq };
    await this.options.record(event);
    onStep?.('logged', range);
    if (this.lmdb) {
      await log.dropThrough(event.toSeq);
      onStep?.('dropped', range);
    }
    return event;
  }

  /** A file a crash left named but unlogged, if it is whole: its event, to log now. */
  private async adopt(run: {
    fromSeq: number;
    toSeq: number;
    reason: ArchiveReason;
  }): Promise<ArchiveEvent | undefined> {
    const entry = this.options.archive
      .entries()
      .find((e) => e.fromSeq === run.fromSeq && e.toSeq <= run.toSeq);
    if (entry === undefined) return undefined;
    try {
      const file = await ArchiveFile.open(entry.path);
      for await (const stored of file.readStored()) void stored;
      const { header } = file;
      const { size, sha256 } = await fileDigest(entry);
      return {
        type: 'LogSegmentArchived',
        fromSeq: header.fromSeq,
        toSeq: header.toSeq,
        events: header.events,
        firstAt: header.firstAt,
        lastAt: header.lastAt,
        file: entry.file,
        bytes: size,
        sha256,
        reason: run.reason,
      };
    } catch (error) {
      if (!(error instanceof EventLogError)) throw error;
      // Whatever the crash left is rewritten from the live log, which still holds it all.
      await rm(entry.path, { force: true });
      return undefined;
    }
  }

  private async write(
    origin: LogOrigin,
    run: { fromSeq: number; toSeq: number; reason: ArchiveReason },
  ): Promise<ArchiveEvent> {
    const { log, archive, onStep } = this.options;
    const writer = new ArchiveWriter(origin);
    let count = 0;
    for await (const stored of log.readStored(
      run.fromSeq,
      run.toSeq,
    ) as AsyncIterable<StoredEvent>) {
      writer.add(stored);
      count += 1;
      if (count % EVENTS_PER_TURN === 0) await yieldTurn();
    }
    if (writer.lastSeq !== run.toSeq) {
      throw new EventLogError(
        `retention: the live log gave seq ${run.fromSeq} to ${writer.lastSeq ?? 'none'}, not to ${run.toSeq}`,
      );
    }
    const range = { fromSeq: run.fromSeq, toSeq: run.toSeq };
    const written = await writer.write(archive.dir, (step) => onStep?.(step, range));
    return {
      type: 'LogSegmentArchived',
      fromSeq: written.header.fromSeq,
      toSeq: written.header.toSeq,
      events: written.header.events,
      firstAt: written.header.firstAt,
      lastAt: written.header.lastAt,
      file: written.file,
      bytes: written.bytes,
      sha256: written.sha256,
      reason: run.reason,
    };
  }

  /** Deletes the files past `ARCHIVE_RETENTION`, oldest first, each logged before it goes. */
  private async expire(): Promise<number> {
    const { archive, policy, onStep } = this.options;
    if (policy.archiveRetentionMs <= 0) return 0;
    let expired = 0;
    for (const entry of archive.entries()) {
      const header = await readArchiveHeader(entry.path);
      if (this.options.clock() - Date.parse(header.lastAt) < policy.archiveRetentionMs) break;
      const { size } = await stat(entry.path);
      await this.options.record({
        type: 'LogArchiveExpired',
        fromSeq: entry.fromSeq,
        toSeq: entry.toSeq,
        lastAt: header.lastAt,
        file: entry.file,
        bytes: size,
      });
      await rm(entry.path, { force: true });
      onStep?.('expired', { fromSeq: entry.fromSeq, toSeq: entry.toSeq });
      expired += 1;
    }
    return expired;
  }
}

async function all<T>(items: Iterable<T> | AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** A file's size and SHA-256. */
async function fileDigest(entry: ArchiveEntry): Promise<{ size: number; sha256: string }> {
  const content = await readFile(entry.path);
  return { size: content.length, sha256: createHash('sha256').update(content).digest('hex') };
}
