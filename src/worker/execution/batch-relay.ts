/**
 * A batch's outcomes on their way to the router: each OUTCOME frame's records are checked
 * (`BatchOutcomes`) and passed on as payload chunks of whole records, several frames joined into
 * one chunk while more are already waiting (never past 1 MiB), so a thousand fast inputs cost a
 * few answers, not a thousand. Nothing of an outcome is kept once it is sent.
 */
import { MAX_PIECE } from '../core/executor-link/frames.js';
import { BatchOutcomes } from '../core/executor-link/outcomes.js';

/** Sends one payload chunk to the router (awaiting backpressure). */
export type ChunkSender = (data: Buffer) => Promise<void>;

/** The records of one batch, checked and gathered into chunks. */
export class BatchRelay {
  readonly outcomes: BatchOutcomes;
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(
    inputs: number,
    private readonly send: ChunkSender,
  ) {
    this.outcomes = new BatchOutcomes(inputs);
  }

  /** Takes an OUTCOME frame's body; sends what waits when `more` says no frame is waiting. */
  async outcome(body: Buffer, more: boolean): Promise<void> {
    this.outcomes.accept(body);
    if (this.pendingBytes + body.length > MAX_PIECE) await this.flush();
    this.pending.push(body);
    this.pendingBytes += body.length;
    if (!more) await this.flush();
  }

  /** Sends the records that wait, as one chunk. */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    await this.send(data);
  }
}
