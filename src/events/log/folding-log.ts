/**
 * What every event log backend shares, whatever stores its events: the folded state kept beside
 * the log, the seqs it has reached, the spacing of its own `Snapshot` events, stamping an append,
 * and the followers waiting for the next commit. A backend (`lmdb/`, `jetstream/`) adds only its
 * transport (how events are stored, read and followed) and, for JetStream, its fencing.
 */
import { encodeEvent, isoInstant } from '../decode.js';
import { EventLogError } from '../errors.js';
import type { LogProjection } from '../projection.js';
import { snapshotDue, snapshotEvent, stampEvents } from '../stamp.js';
import type { ClusterEvent, NewEvent, StoredEvent } from '../types.js';

/** The options every backend takes. */
export interface FoldingLogOptions<S> {
  /** Open for reading only. Default false. */
  readonly readOnly?: boolean;
  /** The clock that stamps `at`, in epoch milliseconds. Default `Date.now`. */
  readonly clock?: () => number;
  /** A fold to keep beside the log; needed for `state` and for snapshots. */
  readonly projection?: LogProjection<S>;
  /** Append a `Snapshot` after this many events since the last one; 0 never. Default 10,000. */
  readonly snapshotEvery?: number;
  /**
   * Also append one when this long (ms, by the clock) has passed since the last one (or since
   * the first event folded), so even a quiet log closes a segment its retention can archive
   * (`SNAPSHOT_INTERVAL`). 0 or absent: by count alone.
   */
  readonly snapshotIntervalMs?: number;
}

/** One append stamped: its events and the instant they share (as text and in epoch ms). */
export interface StampedAppend {
  readonly events: ClusterEvent[];
  readonly at: string;
  readonly ms: number;
}

/** The shared half of an event log; see the module comment. */
export abstract class FoldingLog<S> {
  private next: number;
  private snapshotSeq: number | undefined;
  private working: S | undefined;
  /** How many events the next snapshot waits at least: the last one's weight (`snapshotDue`). */
  private snapshotSpacing: number | undefined;
  /** When the last snapshot was taken (epoch ms), or the first event folded before any. */
  private snapshotAtMs: number | undefined;
  private lastInstant = { ms: NaN, text: '' };
  private readonly followers = new Set<() => void>();
  private isClosed = false;

  protected constructor(
    protected readonly options: FoldingLogOptions<S>,
    lastSeq: number,
    lastSnapshot: number | undefined,
  ) {
    this.next = lastSeq + 1;
    this.snapshotSeq = lastSnapshot;
  }

  /** Where it is, for messages. */
  abstract readonly location: string;
  /** The seq of the first event, or undefined for an empty log. */
  abstract readonly firstSeq: number | undefined;

  /** The seq of the last event this handle knows (appended, read at open, or followed). */
  get lastSeq(): number {
    return this.next - 1;
  }

  /** The folded state after `lastSeq`. Needs a projection. */
  get state(): S {
    if (!this.options.projection)
      throw new EventLogError('this log was opened without a projection');
    return this.working as S;
  }

  /** The seq the next event takes. */
  protected get nextSeq(): number {
    return this.next;
  }

  /** The seq of the newest `Snapshot` this handle knows. */
  protected get lastSnapshot(): number | undefined {
    return this.snapshotSeq;
  }

  /** Whether `close` has begun. */
  protected get closed(): boolean {
    return this.isClosed;
  }

  /** Marks the log closed and wakes every follower (they see it closed and end). */
  protected markClosed(): void {
    this.isClosed = true;
    this.wakeFollowers();
  }

  /**
   * Why the backend refuses to append now (a write that failed earlier, a lost fence, a standby
   * still following), if it does.
   */
  protected abstract writeRefusal(): Error | undefined;

  /** The refusal after `failure` made the log stop writing. */
  protected failedEarlier(failure: Error): EventLogError {
    return new EventLogError(
      `event log ${this.location} failed to write earlier: ${failure.message}`,
    );
  }

  /** Refuses to append to a closed or read-only log, or one its backend refuses. */
  protected assertWritable(): void {
    if (this.isClosed) throw new EventLogError(`event log ${this.location} is closed`);
    if (this.options.readOnly)
      throw new EventLogError(`event log ${this.location} is open read-only`);
    const refusal = this.writeRefusal();
    if (refusal) throw refusal;
  }

  /**
   * Stamps one append for a writer: contiguous seqs from the next, one `at` from the clock, one
   * `cause`; every event validated before any is stored, so a bad one refuses the whole append.
   */
  protected stamp(input: NewEvent | readonly NewEvent[], cause: string | null): StampedAppend {
    this.assertWritable();
    const list: readonly NewEvent[] = Array.isArray(input) ? input : [input as NewEvent];
    const ms = (this.options.clock ?? Date.now)();
    const at = this.instant(ms);
    return { events: stampEvents(list, this.next, at, cause), at, ms };
  }

  /** Starts the fold over: the projection's initial state, the next event `firstSeq`. */
  protected resetFold(firstSeq: number): void {
    const { projection } = this.options;
    if (projection) this.working = projection.initial();
    this.next = firstSeq;
  }

  /** Folds one stored event (appended, read at open, followed or imported). */
  protected fold(event: ClusterEvent): void {
    this.next = event.seq + 1;
    if (event.type === 'Snapshot') {
      this.snapshotSeq = event.seq;
      this.snapshotAtMs = Date.parse(event.at);
    } else {
      this.snapshotAtMs ??= Date.parse(event.at);
    }
    const { projection } = this.options;
    if (projection) this.working = projection.apply(this.working as S, event);
  }

  /**
   * The log's own `Snapshot` after the events folded so far, when one is due (`snapshotDue`),
   * already folded (restoring a snapshot of the very state it was taken from would only rebuild
   * that state: the projection just advances its seq). The backend stores it.
   */
  protected snapshotIfDue(at: string, ms: number): StoredEvent | undefined {
    const { projection } = this.options;
    if (!projection) return undefined;
    const every = this.options.snapshotEvery ?? 10_000;
    this.snapshotSpacing ??= projection.weight?.(this.working as S) ?? 0;
    const interval = this.options.snapshotIntervalMs ?? 0;
    const due =
      snapshotDue(this.lastSeq, this.snapshotSeq, this.firstSeq, every, this.snapshotSpacing) ||
      (interval > 0 &&
        this.snapshotAtMs !== undefined &&
        ms - this.snapshotAtMs >= interval &&
        this.lastSeq > (this.snapshotSeq ?? 0));
    if (!due) return undefined;
    this.snapshotSpacing = projection.weight?.(this.working as S) ?? 0;
    const event = snapshotEvent(this.next, at, projection.toSnapshot(this.working as S));
    this.next = event.seq + 1;
    this.snapshotSeq = event.seq;
    this.snapshotAtMs = ms;
    this.working = projection.advance(this.working as S, event.seq);
    return { event, text: encodeEvent(event) };
  }

  /** Wakes every follower waiting in `nextCommit` (new events are committed, or the log closed). */
  protected wakeFollowers(): void {
    for (const wake of this.followers) wake();
  }

  /** Resolves at the next `wakeFollowers`, after `pollMs`, or when `signal` aborts. */
  protected nextCommit(signal: AbortSignal | undefined, pollMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.followers.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, pollMs);
      this.followers.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** `isoInstant(ms)`, remembered for the last millisecond asked (a busy log asks it again). */
  private instant(ms: number): string {
    if (ms !== this.lastInstant.ms) this.lastInstant = { ms, text: isoInstant(ms) };
    return this.lastInstant.text;
  }
}
