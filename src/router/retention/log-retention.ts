/**
 * The router's log retention (shell): runs the archiver (`src/events/archive/`) on a timer while
 * the router leads, records each step through the journal as a core decision, sets a JetStream
 * stream's limits to match, and keeps what `readie status` and the metrics show of the live log
 * and its archive. Archiving never blocks a call: a pass runs between them, yielding as it goes,
 * and a pass that fails is logged and tried again at the next one.
 */
import { join } from 'node:path';
import {
  ArchiveDirectory,
  EventLog,
  isJetStreamLocation,
  JetStreamEventLog,
  LogArchiver,
  type ArchiveEvent,
  type ArchiveSummary,
  type EventLogBackend,
  type PassReport,
} from '../../events/index.js';
import { decide } from '../../core/decisions.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { LogView } from '../../proto/gen/readie/v1/admin.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';

/** How often a pass runs while the router leads. */
export const ARCHIVE_PASS_INTERVAL_MS = 60_000;

/** Where a log's archive goes when `--archive` names none: beside an LMDB log, inside it. */
export function defaultArchiveDir(logLocation: string): string | undefined {
  return isJetStreamLocation(logLocation) ? undefined : join(logLocation, 'archive');
}

/** What the retention needs of the router. */
export interface LogRetentionOptions {
  readonly log: EventLogBackend<ClusterState>;
  readonly journal: Journal;
  readonly config: Config;
  readonly clock: () => number;
  readonly logger: Logger;
  /** The archive directory (`--archive`); undefined: the router archives nothing. */
  readonly archiveDir: string | undefined;
  /** Told of every segment run archived and every file expired. */
  readonly onArchived?: (event: ArchiveEvent) => void;
  /** Told when a pass fails. */
  readonly onFailure?: () => void;
  /** How often a pass runs (default `ARCHIVE_PASS_INTERVAL_MS`). */
  readonly passIntervalMs?: number;
}

/** The live log's first event, for status. */
interface LiveStart {
  readonly seq: number;
  readonly at: string;
}

/** The retention of the router's log. */
export class LogRetention {
  private readonly archiver: LogArchiver | undefined;
  private readonly archive: ArchiveDirectory | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private problem = '';
  private lastPassAt = '';
  private summary: ArchiveSummary | undefined;
  private liveStart: LiveStart | undefined;
  private liveBytes = 0;

  constructor(private readonly options: LogRetentionOptions) {
    const { config, archiveDir, log } = options;
    if (archiveDir === undefined || !this.retains()) return;
    this.archive = ArchiveDirectory.open(archiveDir, { create: true });
    this.archiver = new LogArchiver({
      log,
      archive: this.archive,
      policy: {
        logRetentionMs: config.LOG_RETENTION,
        logMaxBytes: config.LOG_MAX_BYTES,
        archiveRetentionMs: config.ARCHIVE_RETENTION,
      },
      clock: options.clock,
      record: (event) => this.record(event),
      inFlightSince: () => oldestInFlight(log.state),
      onLost: (range) =>
        options.logger.error(
          { fromSeq: range.fromSeq, toSeq: range.toSeq, log: log.location },
          "the stream's limits dropped events before they were archived (no router led long enough to archive them)",
        ),
    });
  }

  /** Why the router archives nothing, or '' when it does. */
  get off(): string {
    if (!this.retains()) return 'LOG_RETENTION and LOG_MAX_BYTES are 0: the log keeps everything';
    if (this.options.archiveDir === undefined) {
      return 'no --archive directory: a JetStream log keeps everything (its stream has no limits)';
    }
    return '';
  }

  /**
   * Before leading: refuses an archive directory that holds another log's archive, and sets a
   * JetStream stream's limits to the retention (its stream then drops what is archived).
   */
  async prepare(): Promise<void> {
    const { log } = this.options;
    const origin = await log.origin();
    if (this.archive && origin) await this.archive.checkOrigin(origin);
    if (log instanceof JetStreamEventLog && this.archiver) {
      await log.applyLimits({
        maxAgeMs: this.options.config.LOG_RETENTION,
        maxBytes: this.options.config.LOG_MAX_BYTES,
      });
    }
  }

  /** Starts passing on the timer (a first pass at once). */
  start(): void {
    if (this.stopped) return;
    const every = this.options.passIntervalMs ?? ARCHIVE_PASS_INTERVAL_MS;
    const tick = () => {
      void this.passNow().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, every);
      });
    };
    this.timer = setTimeout(tick, 0);
    this.timer.unref();
  }

  /** Stops the timer; a pass in flight finishes its step. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Runs a pass now (joined if one runs); resolves with what it did, undefined when off or failed. */
  async passNow(): Promise<PassReport | undefined> {
    let report: PassReport | undefined;
    if (this.archiver && !this.options.journal.failed) {
      try {
        report = await this.archiver.pass();
        this.problem = '';
      } catch (error) {
        this.problem = (error as Error).message;
        this.options.onFailure?.();
        this.options.logger.error(
          { err: error, archive: this.options.archiveDir },
          'archiving the event log failed: it is tried again at the next pass',
        );
      }
      this.lastPassAt = new Date(this.options.clock()).toISOString();
    }
    await this.refresh();
    return report;
  }

  /** The log and its archive, as `readie status` shows them (read at the last pass). */
  view(): LogView {
    const { config, log, archiveDir } = this.options;
    const archive = this.summary;
    return {
      location: log.location,
      liveBytes: this.liveBytes,
      firstSeq: this.liveStart?.seq ?? 0,
      firstAt: this.liveStart?.at ?? '',
      lastSeq: log.lastSeq,
      archiveDir: this.archive ? (archiveDir ?? '') : '',
      archiveFiles: archive?.files ?? 0,
      archiveBytes: archive?.bytes ?? 0,
      archiveFirstSeq: archive?.fromSeq ?? 0,
      archiveLastSeq: archive?.toSeq ?? 0,
      archiveFirstAt: archive?.firstAt ?? '',
      archiveLastAt: archive?.lastAt ?? '',
      logRetentionMs: config.LOG_RETENTION,
      logMaxBytes: config.LOG_MAX_BYTES,
      archiveRetentionMs: config.ARCHIVE_RETENTION,
      archiveOff: this.off,
      archiveProblem: this.problem,
      lastPassAt: this.lastPassAt,
    };
  }

  /** Reads the live log's size and start and the archive's summary again. */
  async refresh(): Promise<void> {
    const { log } = this.options;
    try {
      this.liveBytes = await log.liveBytes();
      const first = log.firstSeq;
      if (first !== undefined && first !== this.liveStart?.seq) {
        for await (const event of log.read(first, first)) this.liveStart = event;
      }
      this.summary = await this.archive?.summary();
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not read the size of the log or its archive');
    }
  }

  private retains(): boolean {
    return this.options.config.LOG_RETENTION > 0 || this.options.config.LOG_MAX_BYTES > 0;
  }

  /** Records an archive step as a core decision; resolves once it is durable. */
  private async record(event: ArchiveEvent): Promise<void> {
    const { journal, logger } = this.options;
    await journal.record(decide('archive', journal.state, event)).durable;
    this.options.onArchived?.(event);
    logger.info(
      event.type === 'LogSegmentArchived'
        ? {
            fromSeq: event.fromSeq,
            toSeq: event.toSeq,
            file: event.file,
            bytes: event.bytes,
            reason: event.reason,
          }
        : { fromSeq: event.fromSeq, toSeq: event.toSeq, file: event.file, lastAt: event.lastAt },
      event.type === 'LogSegmentArchived'
        ? 'event log segment archived'
        : 'archive file expired and deleted',
    );
  }
}

/** When the oldest call in flight was placed (its segment stays live), if any call is. */
function oldestInFlight(state: ClusterState): string | undefined {
  let oldest: string | undefined;
  for (const reservation of state.reservations.values()) {
    if (oldest === undefined || reservation.since < oldest) oldest = reservation.since;
  }
  return oldest;
}

/** The bytes an LMDB log's data file takes on disk (for status beside its live bytes). */
export function diskBytes(log: EventLogBackend<unknown>): number | undefined {
  return log instanceof EventLog ? log.diskBytes() : undefined;
}
