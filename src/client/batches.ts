/**
 * Batches on the wire for the TypeScript client (docs/clients.md, "Batches"): one call carrying
 * many inputs of one function. The payload is the usual `json-call` object with `inputs`, an
 * array of argument arrays, and `kwargs` for every input; the answer's chunks hold outcome
 * records (input index, flags, microseconds in the function, data length, then a piece of the
 * input's JSON envelope), each whole within its chunk. And how many inputs a batch carries.
 */
import type { BoundedMap } from '../shared/bounded-map.js';
import { ProtocolError } from './errors.js';
import { encodeJsonCall, type PythonCall } from './json-call.js';

/** The most inputs one batch carries (the router refuses more). */
export const MAX_BATCH_INPUTS = 1024;
/** The most inputs of a batch its container runs at once. */
export const MAX_INPUTS_AT_ONCE = 256;

const RECORD_HEAD = 13;
const RECORD_OK = 0x01;
const RECORD_LAST = 0x02;

/**
 * A map's input whose arguments do not encode as JSON (a `BigInt`, a cycle): that input's own
 * failure, in its place (with `returnExceptions`), never its batch's.
 */
export class InputEncodingError extends TypeError {
  override readonly name = 'InputEncodingError';

  constructor(
    /** The input's index in the map. */
    readonly inputIndex: number,
    cause: unknown,
  ) {
    super(`input ${inputIndex}: its arguments do not encode as JSON: ${String(cause)}`, { cause });
  }
}

/** One input's argument list as JSON, checked alone: InputEncodingError when it does not encode. */
export function encodeJsonInput(args: readonly unknown[], index: number): string {
  try {
    return JSON.stringify(args);
  } catch (error) {
    throw new InputEncodingError(index, error instanceof Error ? error.message : error);
  }
}

/**
 * The payload of a json-call batch of `fn` over `inputs`, each already encoded by
 * {@link encodeJsonInput}. TypeError when the call is malformed.
 */
export function encodeJsonBatch(fn: PythonCall, inputs: readonly string[]): Buffer {
  const call = JSON.parse(encodeJsonCall({ ...fn, args: [] }).toString('utf8')) as Record<
    string,
    unknown
  >;
  delete call['args'];
  const head = JSON.stringify(call);
  return Buffer.from(`${head.slice(0, -1)},"inputs":[${inputs.join(',')}]}`, 'utf8');
}

/** An input's whole outcome: its index in the batch, whether it returned, its envelope's bytes. */
export interface Outcome {
  readonly index: number;
  readonly ok: boolean;
  readonly data: Buffer;
  /** The time it spent in the function, in seconds. */
  readonly seconds: number;
}

/** Folds a batch's result chunks into whole outcomes; every record names an input once. */
export class OutcomeReader {
  readonly #pieces = new Map<number, Buffer[]>();
  readonly #answered = new Set<number>();

  constructor(readonly inputs: number) {}

  /** The outcomes a chunk completes (a chunk holds whole records); ProtocolError when malformed. */
  feed(chunk: Buffer): Outcome[] {
    const outcomes: Outcome[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (chunk.length - offset < RECORD_HEAD) {
        throw new ProtocolError("a batch's answer ends inside an outcome record");
      }
      const index = chunk.readUInt32BE(offset);
      const flags = chunk[offset + 4]!;
      const micros = chunk.readUInt32BE(offset + 5);
      const length = chunk.readUInt32BE(offset + 9);
      offset += RECORD_HEAD;
      if (index >= this.inputs || this.#answered.has(index) || length > chunk.length - offset) {
        throw new ProtocolError(
          `a batch's answer holds a malformed outcome record (input ${index})`,
        );
      }
      const piece = chunk.subarray(offset, offset + length);
      offset += length;
      const pieces = this.#pieces.get(index) ?? [];
      pieces.push(piece);
      if ((flags & RECORD_LAST) === 0) {
        this.#pieces.set(index, pieces);
        continue;
      }
      this.#pieces.delete(index);
      this.#answered.add(index);
      outcomes.push({
        index,
        ok: (flags & RECORD_OK) !== 0,
        data: pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces),
        seconds: micros / 1e6,
      });
    }
    return outcomes;
  }

  /** Whether input `index` has its whole outcome. */
  answered(index: number): boolean {
    return this.#answered.has(index);
  }
}

/**
 * A batch aims at this much work (seconds) per input run at once: a slot's share of a map whose
 * inputs take the same time goes in one batch when it is no more (a call more costs the slot
 * 10-30 ms between its batches on a busy cluster).
 */
export const TARGET_BATCH_SECONDS = 2;
/** ...and, sharing out the last inputs, at least this much. */
export const MIN_BATCH_SECONDS = 0.05;
/**
 * A slot's batches hold at most this share of an even split of the inputs not finished: batches
 * shrink as the map nears its end (the first take half the work, the next a quarter, ...), so
 * slots that opened late or ran slowly are not left with the last long batch while the others
 * idle...
 */
export const SHARE_PER_SLOT = 0.5;
/**
 * ...but the whole split when the inputs take the same time (their middle half within
 * UNIFORM_SPREAD of the median): then nothing is left to even out, and every batch more is a call
 * more on the cluster.
 */
export const SHARE_PER_SLOT_UNIFORM = 1;
export const UNIFORM_SPREAD = 0.25;
/** Inputs measured before a batch grows on their time (one fast first input is no promise). */
export const SAMPLES_TO_GROW = 4;
/** What an input costs beside its function, in seconds, for the estimate. */
export const INPUT_OVERHEAD_SECONDS = 20e-6;
/** A slot's next batch is at most this many times its last. */
export const GROWTH = 32;
/** An input's time is the median of this many recent ones. */
export const RECENT_SAMPLES = 64;
/**
 * Slots follow the first inputs (each the first in a new container) only when every input took at
 * least this long (seconds); else they wait for inputs that ran warm (`slotEstimate`).
 */
export const WARM_WAIT_SECONDS = 0.02;

function median(times: readonly number[]): number {
  const ordered = [...times].sort((a, b) => a - b);
  return ordered[Math.floor(ordered.length / 2)]!;
}

/** Inputs' times in a function (seconds): the recent ones, and the recent ones that ran warm. */
export interface InputTimes {
  readonly recent: readonly number[];
  readonly warm: readonly number[];
}

/**
 * The inputs' times the last map of each function measured, which its next map starts from (a
 * client's own, for at most INPUT_TIMES_KEPT functions: the least recently mapped is forgotten).
 */
export type InputTimesMemory = BoundedMap<string, InputTimes>;
export const INPUT_TIMES_KEPT = 256;

/**
 * How many inputs a slot's next batch carries (the Python client's rule): about
 * TARGET_BATCH_SECONDS of work per input run at once, by the inputs' measured time (the median
 * of the recent ones), or as many as run at once before any input was measured; at most GROWTH
 * times the slot's last batch (and SAMPLES_TO_GROW times as many as run at once before that many
 * inputs were measured); when the total is known, no more than SHARE_PER_SLOT (or
 * SHARE_PER_SLOT_UNIFORM) of an even split of the inputs not finished among the map's slots, less
 * what the slot holds already (unless that is less than MIN_BATCH_SECONDS of work: then none
 * while the slot holds some), never more than what is left, and at most MAX_BATCH_INPUTS.
 */
export class BatchSizer {
  largest = 1;
  readonly #recent: number[] = [];
  /** The recent inputs that ran warm (not the first in a new container). */
  readonly #warm: number[] = [];
  /** The least time measured. */
  #least: number | undefined;
  readonly #parallel: number;
  /** Inputs measured by this map (not counting those `earlier` held). */
  measured = 0;
  /** Whether the times held are an earlier map's (until this one measures one). */
  #earlier = false;

  /**
   * `earlier`: the inputs' times an earlier map of the function measured, which this one starts
   * from until it measured an input of its own (then only its own count: the inputs may not be
   * the earlier map's).
   */
  constructor(
    readonly fixed: number | undefined,
    parallel: number,
    earlier?: InputTimes,
  ) {
    this.#parallel = Math.max(1, parallel);
    if (earlier !== undefined && earlier.recent.length > 0) {
      this.#recent.push(...earlier.recent.slice(-RECENT_SAMPLES));
      this.#warm.push(...earlier.warm.slice(-RECENT_SAMPLES));
      this.#least = Math.min(...this.#recent);
      this.#earlier = true;
    }
  }

  /** The recent inputs' times and those that ran warm, for a later map to start from. */
  times(): InputTimes {
    return { recent: [...this.#recent], warm: [...this.#warm] };
  }

  /**
   * One more input's time in the function, in seconds; `warm`: it did not run first in a new
   * container (whose first input pays what the function warms up: imports, caches).
   */
  observe(seconds: number, warm = true): void {
    const time = Math.max(0, seconds);
    if (this.#earlier) {
      this.#earlier = false;
      this.#recent.length = 0;
      this.#warm.length = 0;
      this.#least = undefined;
    }
    this.measured += 1;
    this.#recent.push(time);
    if (this.#recent.length > RECENT_SAMPLES) this.#recent.shift();
    if (warm) {
      this.#warm.push(time);
      if (this.#warm.length > RECENT_SAMPLES) this.#warm.shift();
    }
    this.#least = this.#least === undefined ? time : Math.min(this.#least, time);
  }

  /**
   * An input's time for deciding how many slots (containers) a map opens: the median of the recent
   * warm inputs once `warmNeeded` ran warm; before that, once that many were measured, `estimate`
   * only when no input took less than WARM_WAIT_SECONDS; else undefined (the slot count is not
   * known yet). A map's first inputs each run first
   * in a new container, where a function's first call may take a hundred times its later ones:
   * their median would open containers the work never needs, and waiting for an input to run warm
   * costs less than a container when inputs are that small.
   */
  slotEstimate(warmNeeded: number): number | undefined {
    if (this.#warm.length >= warmNeeded) return median(this.#warm);
    if (
      this.#recent.length < warmNeeded ||
      this.#least === undefined ||
      this.#least < WARM_WAIT_SECONDS
    ) {
      return undefined;
    }
    return this.estimate;
  }

  /**
   * An input's time in the function: the median of the last RECENT_SAMPLES (an input that warmed
   * something up, the first one say, does not make the others look slow); undefined before any.
   */
  get estimate(): number | undefined {
    return this.#recent.length === 0 ? undefined : median(this.#recent);
  }

  /** Whether the recent inputs took the same time (SAMPLES_TO_GROW of them at least). */
  get uniform(): boolean {
    if (this.#recent.length < SAMPLES_TO_GROW) return false;
    const ordered = [...this.#recent].sort((a, b) => a - b);
    const count = ordered.length;
    const spread = ordered[Math.floor((3 * count) / 4)]! - ordered[Math.floor(count / 4)]!;
    return spread <= UNIFORM_SPREAD * ordered[Math.floor(count / 2)]!;
  }

  /**
   * The next batch's size for a slot whose last batch held `last`, when `remaining` inputs are
   * not given to any slot yet (undefined: not known), among `slots` slots, `pending` inputs are
   * given to slots and not finished, `own` of them this slot's (both less what the inputs running
   * now have done, in inputs); 0: none now (the slot holds its share).
   */
  next(last: number, remaining: number | undefined, slots: number, pending = 0, own = 0): number {
    let size: number;
    const estimate = this.estimate;
    if (this.fixed !== undefined) size = this.fixed;
    // Before any input was measured: as many as run at once.
    else if (estimate === undefined) size = this.#parallel;
    else {
      const perInput = estimate + INPUT_OVERHEAD_SECONDS;
      size = Math.floor((TARGET_BATCH_SECONDS * this.#parallel) / perInput);
      size = Math.min(size, Math.max(last, this.#parallel) * GROWTH);
      // Neither one fast first input nor an earlier map's times promise that these inputs are
      // fast: a few of them are measured before a batch grows on it.
      if (this.measured < SAMPLES_TO_GROW) size = Math.min(size, this.#parallel * SAMPLES_TO_GROW);
      if (remaining !== undefined) {
        const floor = Math.max(
          this.#parallel,
          Math.floor((MIN_BATCH_SECONDS * this.#parallel) / perInput),
        );
        const part = this.uniform ? SHARE_PER_SLOT_UNIFORM : SHARE_PER_SLOT;
        const share = Math.floor((part * (remaining + pending)) / Math.max(1, slots) - own + 0.5);
        // The slot holds its share already (or all but less than a batch worth its call).
        if (own > 0 && share < floor) return 0;
        size = Math.min(size, Math.max(floor, share));
      }
    }
    if (remaining !== undefined && remaining > 0) size = Math.min(size, remaining);
    size = Math.max(1, Math.min(size, MAX_BATCH_INPUTS));
    this.largest = Math.max(this.largest, size);
    return size;
  }
}
