/**
 * Batches on the executor link (docs/executor-protocol.md, "Batches"): the outcome records an
 * OUTCOME frame carries and the INPUT_LOG lines, checked as they arrive. The executor runs user
 * code beside it, so every record is checked before the worker passes it on: an index within the
 * batch, an input not already answered, a length that matches the frame, at most
 * `MAX_INPUT_OUTCOME_BYTES` per input, and every input answered before RESULT_END. What the
 * worker keeps per batch is a few bytes per input (at most `MAX_BATCH_INPUTS`), never an outcome's
 * bytes: those go on to the router as they came. Pure.
 */
import { FrameProtocolError, MAX_PIECE, type Frame } from './frames.js';

/** The most inputs a batch carries (the router refuses more). */
export const MAX_BATCH_INPUTS = 1024;
/** The most inputs of a batch its container runs at once. */
export const MAX_INPUTS_AT_ONCE = 256;
/** An outcome record's head: input index u32, flags u8, microseconds u32, data length u32. */
export const OUTCOME_RECORD_HEAD_BYTES = 13;
/** The most bytes one input's outcome (its result envelope) may hold. */
export const MAX_INPUT_OUTCOME_BYTES = 64 * 1024 * 1024;
/** Record flags: the input returned (else it raised); this is its outcome's last piece. */
export const RecordFlag = { OK: 0x01, LAST: 0x02 } as const;

/** An INPUT_LOG frame's input index, source byte and text. */
export function decodeInputLogBody(frame: Frame): { input: number; source: number; text: string } {
  if (frame.body.length < 5) {
    throw new FrameProtocolError('an INPUT_LOG frame without its input index and source byte');
  }
  return {
    input: frame.body.readUInt32BE(0),
    source: frame.body[4]!,
    text: frame.body.subarray(5).toString('utf8'),
  };
}

/** The inputs of one batch as their outcomes arrive. */
export class BatchOutcomes {
  private readonly bytes: Uint32Array;
  private readonly answered: Uint8Array;
  private remaining: number;
  private raisedCount = 0;

  constructor(readonly inputs: number) {
    this.bytes = new Uint32Array(inputs);
    this.answered = new Uint8Array(inputs);
    this.remaining = inputs;
  }

  /** Inputs whose whole outcome says they raised (their record flags without OK). */
  get raised(): number {
    return this.raisedCount;
  }

  /** Inputs without their whole outcome yet. */
  get unanswered(): number {
    return this.remaining;
  }

  /** The first `limit` inputs without their whole outcome, by index. */
  unansweredInputs(limit: number): number[] {
    const found: number[] = [];
    for (let index = 0; index < this.inputs && found.length < limit; index += 1) {
      if (this.answered[index] === 0) found.push(index);
    }
    return found;
  }

  /** Checks an input index a line or a record names. */
  checkInput(index: number, what: string): void {
    if (index >= this.inputs) {
      throw new FrameProtocolError(
        `${what} names input ${index} of a batch of ${this.inputs} inputs`,
      );
    }
  }

  /**
   * Checks every record of an OUTCOME frame's body and counts it; throws FrameProtocolError when
   * one breaks the protocol. Returns how many inputs it finished.
   */
  accept(body: Buffer): number {
    if (body.length > MAX_PIECE) {
      throw new FrameProtocolError(
        `an OUTCOME frame of ${body.length} bytes: one carries at most ${MAX_PIECE}`,
      );
    }
    let finished = 0;
    let offset = 0;
    while (offset < body.length) {
      if (body.length - offset < OUTCOME_RECORD_HEAD_BYTES) {
        throw new FrameProtocolError('an OUTCOME frame ends inside a record head');
      }
      const index = body.readUInt32BE(offset);
      const flags = body[offset + 4]!;
      const length = body.readUInt32BE(offset + 9);
      offset += OUTCOME_RECORD_HEAD_BYTES;
      if (length > body.length - offset) {
        throw new FrameProtocolError('an OUTCOME record is longer than its frame');
      }
      offset += length;
      this.checkInput(index, 'an OUTCOME record');
      if ((flags & ~(RecordFlag.OK | RecordFlag.LAST)) !== 0) {
        throw new FrameProtocolError(
          `an OUTCOME record with unknown flags 0x${flags.toString(16)}`,
        );
      }
      if (this.answered[index] === 1) {
        throw new FrameProtocolError(`an OUTCOME record for input ${index}, already answered`);
      }
      const total = this.bytes[index]! + length;
      if (total > MAX_INPUT_OUTCOME_BYTES) {
        throw new FrameProtocolError(
          `the outcome of input ${index} passed ${MAX_INPUT_OUTCOME_BYTES} bytes, the most one input's may hold`,
        );
      }
      this.bytes[index] = total;
      if ((flags & RecordFlag.LAST) !== 0) {
        this.answered[index] = 1;
        this.remaining -= 1;
        finished += 1;
        if ((flags & RecordFlag.OK) === 0) this.raisedCount += 1;
      }
    }
    return finished;
  }

  /** At the batch's end (RESULT_END): throws unless every input was answered. */
  checkComplete(): void {
    if (this.remaining === 0) return;
    const some = this.unansweredInputs(5);
    throw new FrameProtocolError(
      `the executor ended the batch with ${this.remaining} of ${this.inputs} inputs unanswered (${some.join(', ')}${this.remaining > some.length ? ', ...' : ''})`,
    );
  }
}
