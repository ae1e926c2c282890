/**
 * A log's archive directory: its files by seq range (read from their names), the log they belong
 * to (every header names the same origin: a directory holds one log's archive only), what it
 * holds in all, and the leftovers of a write a crash interrupted (hidden temporary files).
 */
import { chmodSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EventLogError } from '../errors.js';
import { describeOrigin, sameOrigin, type LogOrigin } from '../event-log.js';
import { readArchiveHeader } from './archive-file.js';
import { parseArchiveFileName } from './archive-format.js';

/** One file of an archive directory, as its name describes it. */
export interface ArchiveEntry {
  readonly file: string;
  readonly path: string;
  readonly fromSeq: number;
  readonly toSeq: number;
}

/** What an archive directory holds, for `readie status` and metrics. */
export interface ArchiveSummary {
  readonly files: number;
  readonly bytes: number;
  readonly fromSeq: number | null;
  readonly toSeq: number | null;
  /** The first event's instant of the oldest file, the last event's of the newest. */
  readonly firstAt: string | null;
  readonly lastAt: string | null;
}

/** An archive directory: another log's archive is refused (`checkOrigin`). */
export class ArchiveDirectory {
  private constructor(readonly dir: string) {}

  /**
   * The directory `dir`; created (0700: archives name every session, like the log) when
   * `create`, else it must exist.
   */
  static open(dir: string, { create = false } = {}): ArchiveDirectory {
    if (create) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
    } else if (!isDirectory(dir)) {
      throw new EventLogError(`${dir}: no archive directory there`);
    }
    return new ArchiveDirectory(dir);
  }

  /** Whether `dir` is a directory holding at least one archive file. */
  static holdsArchive(dir: string): boolean {
    return isDirectory(dir) && readdirSync(dir).some((name) => parseArchiveFileName(name));
  }

  /** Its files, by seq. */
  entries(): ArchiveEntry[] {
    return readdirSync(this.dir)
      .flatMap((file) => {
        const range = parseArchiveFileName(file);
        return range ? [{ file, path: join(this.dir, file), ...range }] : [];
      })
      .sort((a, b) => a.fromSeq - b.fromSeq || a.toSeq - b.toSeq);
  }

  /** The origin its oldest file's header names (undefined when it holds none). */
  async origin(): Promise<LogOrigin | undefined> {
    const [first] = this.entries();
    return first && (await readArchiveHeader(first.path)).origin;
  }

  /**
   * Refuses the directory unless its files are `origin`'s: an archive from another cluster (its
   * first event, router, stream and ID) must not be mixed with this log's. The oldest and the
   * newest file are read (a start must not read thousands of headers; files are only ever added
   * by the log's own archiver, which checks this before its first).
   */
  async checkOrigin(origin: LogOrigin): Promise<void> {
    const entries = this.entries();
    const ends = entries.length > 1 ? [entries[0], entries.at(-1)] : entries;
    for (const entry of ends) {
      if (entry === undefined) continue;
      const theirs = (await readArchiveHeader(entry.path)).origin;
      if (!sameOrigin(theirs, origin)) {
        throw new EventLogError(
          `archive directory ${this.dir} holds another log's archive (${entry.file}: ${describeOrigin(theirs)}; this log: ${describeOrigin(origin)}): give each log its own archive directory`,
        );
      }
    }
  }

  /** What it holds. */
  async summary(): Promise<ArchiveSummary> {
    const entries = this.entries();
    const first = entries[0];
    const last = entries.at(-1);
    let bytes = 0;
    for (const entry of entries) bytes += statSync(entry.path).size;
    return {
      files: entries.length,
      bytes,
      fromSeq: first?.fromSeq ?? null,
      toSeq: last?.toSeq ?? null,
      firstAt: first ? (await readArchiveHeader(first.path)).firstAt : null,
      lastAt: last ? (await readArchiveHeader(last.path)).lastAt : null,
    };
  }

  /** Removes what writes a crash interrupted left (their files were never renamed, never used). */
  removeLeftovers(): string[] {
    const removed = readdirSync(this.dir).filter(
      (name) => name.startsWith('.events-') && name.endsWith('.tmp'),
    );
    for (const name of removed) rmSync(join(this.dir, name), { force: true });
    return removed;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
