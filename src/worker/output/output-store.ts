/**
 * Every call's output (stdout, stderr, readie's notes) kept on the worker's disk for `readie logs`
 * (docs/calls.md): one file per call under `<state-dir>/output`, written line by line as the call
 * streams, so what the client saw survives the client. Bounded per call
 * (`OUTPUT_MAX_CALL_BYTES`: later lines are not kept, a note says so), in total
 * (`OUTPUT_MAX_TOTAL_BYTES`: the oldest ended call's file goes first), in files
 * (`OUTPUT_MAX_CALLS`: calls of little output would otherwise fill the directory long before the
 * bytes do; the oldest ended call's file goes first) and by age (`OUTPUT_RETENTION` after the
 * call ended). A file is named by the SHA-256 of its request ID, so
 * no request ID reaches a path; its first line names the request it holds.
 */
import { EventEmitter } from 'node:events';
import { createHash } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { LogSource } from '../../proto/gen/readie/v1/call.js';
import { formatDuration } from '../../shared/units.js';

/** The store's bounds. */
export interface OutputBounds {
  readonly maxCallBytes: number;
  readonly maxTotalBytes: number;
  /** Calls whose output is kept (files in the directory), running ones included. */
  readonly maxCalls: number;
  readonly retentionMs: number;
}

/** One kept line. */
export interface OutputLine {
  readonly at: string;
  readonly source: LogSource;
  readonly text: string;
}

/** What the store holds of one call. */
export interface KeptOutput {
  readonly lines: OutputLine[];
  readonly truncated: boolean;
  /** True while the call runs: more lines may come (`follow`). */
  readonly running: boolean;
}

/** Why a call's output is not kept here (for a NOT_FOUND that names why). */
export type OutputAbsence =
  | { readonly kind: 'unknown' }
  | { readonly kind: 'aged'; readonly at: string }
  | { readonly kind: 'room'; readonly at: string }
  | { readonly kind: 'count'; readonly at: string };

interface FileEntry {
  readonly requestId: string;
  readonly path: string;
  bytes: number;
  /** When the call ended (epoch ms); null while it runs. */
  endedMs: number | null;
  truncated: boolean;
}

/** How many forgotten request IDs the store remembers, to say why their output is gone. */
const REMEMBERED_ABSENCES = 10_000;

/** A call's output as it is written: `line` for each line, `end` once. */
export class OutputWriter {
  private closed = false;

  constructor(
    private readonly store: CallOutputStore,
    private readonly entry: FileEntry,
    private fd: number | null,
  ) {}

  /** Keeps one line (unless the call's bound is reached: then a note, once, and nothing more). */
  line(source: LogSource, text: string, atMs: number): void {
    if (this.closed || this.fd === null) return;
    const line: OutputLine = { at: new Date(atMs).toISOString(), source, text };
    const record = `${JSON.stringify({ at: line.at, source, text })}\n`;
    const bytes = Buffer.byteLength(record);
    if (this.entry.bytes + bytes > this.store.bounds.maxCallBytes) {
      if (!this.entry.truncated) {
        this.entry.truncated = true;
        this.append(`${JSON.stringify({ truncated: true })}\n`);
        this.store.emit(this.entry.requestId, { truncated: true });
      }
      return;
    }
    this.append(record);
    this.store.emit(this.entry.requestId, line);
  }

  /** The call ended: closes its file; followers are told. */
  end(atMs: number): void {
    if (this.closed) return;
    this.closed = true;
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    this.entry.endedMs = atMs;
    this.store.ended(this.entry);
  }

  private append(record: string): void {
    if (this.fd === null) return;
    try {
      this.entry.bytes += writeSync(this.fd, record);
      this.store.grew(Buffer.byteLength(record));
    } catch {
      // A full or failing disk must not fail the call: stop keeping its output.
      closeSync(this.fd);
      this.fd = null;
    }
  }
}

/** The worker's store of calls' output; see the module comment. */
export class CallOutputStore extends EventEmitter {
  private readonly entries = new Map<string, FileEntry>();
  private readonly absences = new Map<string, OutputAbsence>();
  private totalBytes = 0;

  private constructor(
    private readonly dir: string,
    readonly bounds: OutputBounds,
    private readonly clock: () => number,
  ) {
    super();
    this.setMaxListeners(0);
  }

  /** Opens the store in `dir` (created, root's alone), taking in the files a previous run kept. */
  static open(dir: string, bounds: OutputBounds, clock: () => number): CallOutputStore {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const store = new CallOutputStore(dir, bounds, clock);
    const found: FileEntry[] = [];
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      try {
        const header = readFileSync(path, 'utf8').split('\n', 1)[0] ?? '';
        const { requestId } = JSON.parse(header) as { requestId?: unknown };
        const stat = statSync(path);
        if (typeof requestId !== 'string') throw new Error('no request');
        found.push({ requestId, path, bytes: stat.size, endedMs: stat.mtimeMs, truncated: false });
      } catch {
        rmSync(path, { force: true });
      }
    }
    found.sort((a, b) => (a.endedMs ?? 0) - (b.endedMs ?? 0));
    for (const entry of found) {
      store.entries.set(entry.requestId, entry);
      store.totalBytes += entry.bytes;
    }
    store.sweep();
    return store;
  }

  /** Starts keeping `requestId`'s output (a request seen again starts over). */
  begin(requestId: string): OutputWriter {
    this.drop(requestId, null);
    this.absences.delete(requestId);
    const path = join(this.dir, `${createHash('sha256').update(requestId).digest('hex')}.jsonl`);
    const entry: FileEntry = { requestId, path, bytes: 0, endedMs: null, truncated: false };
    let fd: number | null = null;
    try {
      fd = openSync(path, 'w', 0o600);
      const header = `${JSON.stringify({ requestId, startedAt: new Date(this.clock()).toISOString() })}\n`;
      entry.bytes = writeSync(fd, header);
      this.totalBytes += entry.bytes;
    } catch {
      if (fd !== null) closeSync(fd);
      fd = null;
    }
    this.entries.set(requestId, entry);
    return new OutputWriter(this, entry, fd);
  }

  /** What is kept of `requestId`'s output, or why nothing is. */
  read(requestId: string): KeptOutput | OutputAbsence {
    this.sweep();
    const entry = this.entries.get(requestId);
    if (!entry) return this.absences.get(requestId) ?? { kind: 'unknown' };
    const lines: OutputLine[] = [];
    let truncated = entry.truncated;
    let text: string;
    try {
      text = readFileSync(entry.path, 'utf8');
    } catch {
      return { kind: 'unknown' };
    }
    const records = text.split('\n');
    for (let i = 1; i < records.length; i += 1) {
      const record = records[i];
      if (!record) continue;
      const parsed = JSON.parse(record) as Partial<OutputLine> & { truncated?: boolean };
      if (parsed.truncated) truncated = true;
      else if (typeof parsed.text === 'string' && typeof parsed.at === 'string') {
        lines.push({
          at: parsed.at,
          source: parsed.source ?? LogSource.LOG_SOURCE_UNSPECIFIED,
          text: parsed.text,
        });
      }
    }
    return { lines, truncated, running: entry.endedMs === null };
  }

  /** Words for why `requestId`'s output is not kept here. */
  absenceText(requestId: string, absence: OutputAbsence): string {
    switch (absence.kind) {
      case 'aged':
        return `the output of call ${requestId} aged out at ${absence.at} (OUTPUT_RETENTION ${formatDuration(this.bounds.retentionMs)} after the call ended)`;
      case 'room':
        return `the output of call ${requestId} was dropped at ${absence.at} to keep the worker's output under OUTPUT_MAX_TOTAL_BYTES (${this.bounds.maxTotalBytes} bytes; oldest first)`;
      case 'count':
        return `the output of call ${requestId} was dropped at ${absence.at} to keep the output of at most OUTPUT_MAX_CALLS (${this.bounds.maxCalls}) calls on the worker (oldest first)`;
      case 'unknown':
        return `this worker keeps no output of call ${requestId}: it did not run it, or its output is older than the worker's memory of what it dropped`;
    }
  }

  /**
   * Drops what is past the retention or over the total or the file bound (oldest ended first),
   * naming the first of them that applies. Ended calls
   * are kept in the order they ended (`ended` moves each to the back), so the walk stops at the
   * first ended call that may stay: a pass costs what it drops, not what the store holds.
   */
  sweep(): void {
    const now = this.clock();
    for (const entry of this.entries.values()) {
      if (entry.endedMs === null) continue;
      const aged = entry.endedMs + this.bounds.retentionMs <= now;
      const over = this.totalBytes > this.bounds.maxTotalBytes;
      const many = this.entries.size > this.bounds.maxCalls;
      if (!aged && !over && !many) break;
      this.drop(entry.requestId, {
        kind: aged ? 'aged' : over ? 'room' : 'count',
        at: new Date(now).toISOString(),
      });
    }
  }

  /** Bytes kept now, over all calls. */
  get bytes(): number {
    return this.totalBytes;
  }

  /** @internal A writer's bytes. */
  grew(bytes: number): void {
    this.totalBytes += bytes;
  }

  /** @internal A call ended: followers are told; its file now counts for the bounds. */
  ended(entry: FileEntry): void {
    // Keep entries in order of their end, so the sweep walks the oldest first.
    this.entries.delete(entry.requestId);
    this.entries.set(entry.requestId, entry);
    this.emit(entry.requestId, null);
    this.sweep();
  }

  private drop(requestId: string, why: OutputAbsence | null): void {
    const entry = this.entries.get(requestId);
    if (!entry) return;
    this.entries.delete(requestId);
    this.totalBytes -= entry.bytes;
    rmSync(entry.path, { force: true });
    if (why === null) return;
    this.absences.set(requestId, why);
    if (this.absences.size > REMEMBERED_ABSENCES) {
      const oldest = this.absences.keys().next();
      if (!oldest.done) this.absences.delete(oldest.value);
    }
  }
}

/** What a follower hears: a line, the truncation, or null for the call's end. */
export type OutputNews = OutputLine | { readonly truncated: true } | null;
