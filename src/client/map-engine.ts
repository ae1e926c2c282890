/**
 * The engine under `map` and `starmap` (docs/clients.md, "Batches"), the Python client's rules:
 * inputs go to the cluster in batches, one call carrying many inputs, each input's outcome coming
 * back as it finishes. Each concurrency slot is a session (one warm container) running one batch
 * after another (the next one sent while one runs, to wait for its turn at the router); slots
 * open only for work that needs them (4 at first, then one per SLOT_WORK_SECONDS of the work
 * left, at most the cluster's room); a batch's size follows the
 * inputs' measured time (`BatchSizer`). Per input, everything keeps its meaning: its own outcome
 * and error (`input N: `), `retries`, progress, the order of the results. A batch refused before
 * it started is waited out; one that ran and failed fails the inputs it had not finished.
 */
import { createHash } from 'node:crypto';
import { status as Status } from '@grpc/grpc-js';
import { newSessionId, type CallInfo } from './call-info.js';
import {
  BatchSizer,
  encodeJsonInput,
  INPUT_OVERHEAD_SECONDS,
  OutcomeReader,
  SAMPLES_TO_GROW,
  type InputTimesMemory,
} from './batches.js';
import { NeverFitsError, ProtocolError, ReadieError, SessionExpiredError } from './errors.js';
import type { MapOptions, MappedFunction } from './map-options.js';
import { decodeJsonEnvelope } from './json-call.js';
import type { MapProgress } from './progress.js';
import type { RemoteCall } from './remote-call.js';
import { backoffMs, mayRetryRan, needsNewSession, waitsForRoom } from './retry.js';
import { bounded, roomFor, type MapRoom } from './map-room.js';

/** Slots a map opens before it knows its inputs' time. */
export const INITIAL_SLOTS = 4;
/** A slot (a container) is opened only for at least this much work (seconds of its inputs). */
export const SLOT_WORK_SECONDS = 0.1;
/**
 * Slots beyond INITIAL_SLOTS open only once this many inputs were measured (each one's first) and,
 * for small inputs, ran warm (`BatchSizer.slotEstimate`).
 */
export const SAMPLES_TO_OPEN_SLOTS = INITIAL_SLOTS;
/**
 * While a map runs it asks the router again, this often (ms), how much room it has and whether
 * other tenants' calls wait ...
 */
export const ROOM_REFRESH_MS = 1_000;
/**
 * ... and this often while its work wants more slots than the room it was told (containers given
 * back a moment ago count as free once their workers report them gone).
 */
export const ROOM_REFRESH_WANTING_MS = 200;
/** A slot with no input to run for this long gives its container back (ms). */
export const IDLE_RELEASE_MS = 1_000;
/**
 * A slot sends its next batch while one runs (it waits for its session's turn at the router) only
 * when a batch takes less than this (seconds): a session call waits SESSION_WAIT_TIMEOUT at most.
 */
export const PIPELINE_SECONDS = 10;

/** What the engine needs of the client. */
export interface BatchDeps {
  /**
   * Starts one batch of `fn` over `inputs` (each input's argument list, as JSON) in `sessionId`
   * ('' outside sessions).
   */
  startBatch(
    fn: MappedFunction,
    inputs: readonly string[],
    sessionId: string,
    options: MapOptions,
    signal: AbortSignal,
    onChunk: (data: Buffer, call: CallInfo) => void,
    /** The batch was queued in the router's admission queue (true), or admitted (false). */
    onQueue?: (queued: boolean) => void,
  ): RemoteCall<unknown>;
  /** What a map of the budget may use now (rejects when the router cannot say). */
  room(options: MapOptions): Promise<MapRoom>;
  /** Ends a session (best effort). */
  endSession(sessionId: string): Promise<unknown>;
  /** The inputs' times each function's last map measured (the client's). */
  readonly inputTimes: InputTimesMemory;
}

/**
 * What a function's inputs' times are remembered under: its module (or its source's SHA-256), its
 * name, and how many inputs a container runs at once.
 */
function functionKey(fn: MappedFunction, parallel: number): string {
  const where =
    'module' in fn ? fn.module : `sha256:${createHash('sha256').update(fn.source).digest('hex')}`;
  return JSON.stringify([where, fn.function, parallel]);
}

interface Item {
  readonly index: number;
  readonly args: readonly unknown[];
  ranFailures: number;
}

interface Slot {
  sessionId: string;
  /** Sessions a batch ran in and not ended yet. */
  readonly used: string[];
  lastSize: number;
  refusals: number;
  unavailable: number;
  /** Calls of this slot on the cluster now (two while its next batch waits for its turn). */
  inFlight: number;
  /** Batches of this slot under way (their calls and the waits between their tries). */
  running: number;
  /** Inputs given to this slot's batches that have no outcome yet. */
  pending: number;
  /**
   * When the inputs it runs now started, as far as the client knows (`performance.now()`): its
   * last outcome, or when it was given a batch with none pending.
   */
  since: number;
}

/** A call that failed: its error, the inputs it had not finished, the session it was made in. */
interface Failure {
  readonly error: unknown;
  readonly unfinished: Item[];
  readonly sessionId: string;
}

type Output<T> = { readonly index: number } & (
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }
);

/** A copy of a batch's error for one of its inputs (each names its own index). */
function copyOf(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  return Object.assign(Object.create(Object.getPrototypeOf(error) as object) as Error, error, {
    message: error.message,
    stack: error.stack,
  });
}

function indexed(error: unknown, index: number): unknown {
  if (!(error instanceof ReadieError) || error.inputIndex !== undefined) return error;
  error.inputIndex = index;
  error.message = `input ${index}: ${error.message}`;
  return error;
}

/** Waits `ms`, or less: until `signal` aborts or the function given to `wakeBy` is called. */
function sleep(
  ms: number,
  signal: AbortSignal,
  wakeBy?: (wake: (() => void) | undefined) => void,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      wakeBy?.(undefined);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    wakeBy?.(done);
  });
}

/** One map's slots, batches and outputs. */
export class MapEngine<T> {
  readonly #slots: Slot[] = [];
  /** This map's calls waiting in the router's admission queue now. */
  #queuedBatches = 0;
  /** Whether other tenants' calls waited in the router's queue when it was last asked. */
  #othersWaiting = false;
  /**
   * A call of this function that can never fit (its budget is above every worker's): every input
   * left gets this outcome without a call of its own.
   */
  #neverFits: NeverFitsError | undefined;
  readonly #tasks: Promise<void>[] = [];
  #running = 0;
  readonly #queue: Item[] = [];
  #drawn = 0;
  #exhausted = false;
  #drawing: Promise<void> | undefined;
  #handed = 0;
  #emitted = 0;
  readonly #ready = new Map<number, Output<T>>();
  #outbox: Output<T>[] = [];
  #wake: (() => void)[] = [];
  /**
   * Whether the map knows its inputs (`#knowsInputs`): a slot may then send its next batch while
   * one runs (`#depth`) without waiting for the end of the one before. Until then, the slots
   * waiting for their batch to end, to wake then.
   */
  #grown = false;
  readonly #growWaiters = new Set<() => void>();
  /** Wakes the room watch when the work may want more slots than the room. */
  #roomWanted: (() => void) | undefined;
  /** The slot of each input given to a batch that has no outcome yet. */
  readonly #owners = new Map<number, Slot>();
  #failure: unknown = undefined;
  readonly #ending: Promise<unknown>[] = [];
  readonly #sizer: BatchSizer;
  readonly #parallel: number;
  completed = 0;

  constructor(
    private readonly deps: BatchDeps,
    private readonly fn: MappedFunction,
    private readonly inputs: Iterator<readonly unknown[]> | AsyncIterator<readonly unknown[]>,
    private readonly total: number | undefined,
    private readonly options: MapOptions,
    private count: number,
    private readonly progress: MapProgress,
    private readonly stop: AbortSignal,
    othersWaiting = false,
  ) {
    this.#othersWaiting = othersWaiting;
    this.#parallel = Math.max(1, options.maxInputs ?? 1);
    // A later map of the function starts from the inputs' times the last one measured: it opens
    // the slots its work wants at once, where a first map measures its first inputs first.
    this.#sizer = new BatchSizer(
      options.isolateInputs === true ? 1 : options.chunkSize,
      this.#parallel,
      deps.inputTimes.get(functionKey(fn, this.#parallel)),
    );
  }

  /** Batches in flight now. */
  get inFlight(): number {
    return this.#slots.reduce((sum, slot) => sum + slot.inFlight, 0);
  }

  /** The outputs in the order the map hands them out, until every input has one. */
  async *outputs(): AsyncGenerator<Output<T>, void, undefined> {
    this.#openSlots();
    const watching = new AbortController();
    void this.#watchRoom(watching.signal);
    try {
      yield* this.#outputs();
    } finally {
      watching.abort();
      if (this.#sizer.measured > 0)
        this.deps.inputTimes.set(functionKey(this.fn, this.#parallel), this.#sizer.times());
    }
  }

  async *#outputs(): AsyncGenerator<Output<T>, void, undefined> {
    for (;;) {
      if (this.#outbox.length > 0) {
        const out = this.#outbox;
        this.#outbox = [];
        for (const output of out) {
          this.#handed += 1;
          yield output;
        }
        this.#notify();
        continue;
      }
      if (this.#failure !== undefined) throw this.#failure as Error;
      if (this.#running === 0) return;
      await new Promise<void>((resolve) => this.#wake.push(resolve));
      this.progress.draw(false);
    }
  }

  /** Ends every session the map used and has not ended (their containers go at once). */
  async endSessions(): Promise<void> {
    await Promise.allSettled(this.#tasks);
    await Promise.allSettled(this.#ending);
    const sessions = this.#slots.flatMap((slot) => slot.used.splice(0));
    await Promise.allSettled(sessions.map((sessionId) => this.deps.endSession(sessionId)));
  }

  #notify(): void {
    for (const wake of this.#wake.splice(0)) wake();
  }

  /**
   * Asks the router every ROOM_REFRESH_MS how much room the map has: room freed since its start
   * lets it open more slots (within its bounds), and other tenants' calls waiting make its slots
   * give their containers back between batches.
   */
  async #watchRoom(done: AbortSignal): Promise<void> {
    let asked = performance.now();
    while (!done.aborted && !this.stop.aborted) {
      // Looked at again whenever the work wants more slots than the room (its first inputs
      // measured slow, say), not only after a full ROOM_REFRESH_MS decided before it did.
      const wanting = this.count < this.#wanted(true);
      const waitMs =
        (wanting ? ROOM_REFRESH_WANTING_MS : ROOM_REFRESH_MS) - (performance.now() - asked);
      if (waitMs > 0) {
        await sleep(waitMs, done, (wake) => (this.#roomWanted = wake));
        continue;
      }
      asked = performance.now();
      let room: MapRoom;
      try {
        room = await this.deps.room(this.options);
      } catch {
        continue;
      }
      this.#othersWaiting = room.othersWaiting;
      const held = this.options.isolateInputs === true ? this.inFlight : this.#slots.length;
      const count = bounded(held + (roomFor(room, this.options) ?? 0), this.options, this.total);
      if (count > this.count) {
        this.count = count;
        this.#openSlots();
      }
    }
  }

  #wanted(unbounded = false): number {
    let wanted = INITIAL_SLOTS;
    // Small first inputs wait for warm ones (`slotEstimate`) before slots follow them.
    const estimate = this.#sizer.slotEstimate(SAMPLES_TO_OPEN_SLOTS);
    if (estimate !== undefined) {
      const remaining = this.#remaining();
      if (remaining === undefined) return this.count;
      const perInput = estimate + INPUT_OVERHEAD_SECONDS;
      wanted = Math.ceil((remaining * perInput) / this.#parallel / SLOT_WORK_SECONDS);
    }
    if (this.total !== undefined) wanted = Math.min(wanted, this.total);
    return Math.max(1, unbounded ? wanted : Math.min(this.count, wanted));
  }

  #openSlots(): void {
    if (this.stop.aborted) return;
    const wanted = this.#wanted();
    while (this.#slots.length < wanted) {
      const slot: Slot = {
        sessionId: this.options.isolateInputs === true ? '' : newSessionId(),
        used: [],
        lastSize: 0,
        refusals: 0,
        unavailable: 0,
        inFlight: 0,
        running: 0,
        pending: 0,
        since: 0,
      };
      this.#slots.push(slot);
      this.#running += 1;
      this.#tasks.push(
        this.#runSlot(slot)
          .catch((error: unknown) => {
            this.#failure ??= error;
          })
          .finally(() => {
            this.#running -= 1;
            this.#notify();
          }),
      );
    }
  }

  #deliver(index: number, output: Output<T>): void {
    this.completed += 1;
    const owner = this.#owners.get(index);
    if (owner !== undefined) {
      owner.pending -= 1;
      owner.since = performance.now();
      this.#owners.delete(index);
    }
    this.progress.advance(!output.ok);
    if (this.options.orderOutputs === false) this.#outbox.push(output);
    else {
      this.#ready.set(index, output);
      for (let next = this.#ready.get(this.#emitted); next; next = this.#ready.get(this.#emitted)) {
        this.#ready.delete(this.#emitted);
        this.#outbox.push(next);
        this.#emitted += 1;
      }
    }
    this.#notify();
  }

  #fail(item: Item, error: unknown): void {
    this.#deliver(item.index, { index: item.index, ok: false, error: indexed(error, item.index) });
  }

  #remaining(): number | undefined {
    if (this.total === undefined) return this.#exhausted ? this.#queue.length : undefined;
    return Math.max(0, this.total - this.#drawn) + this.#queue.length;
  }

  /**
   * Draws inputs until `wanted` wait or the window is full, and takes up to `wanted` of them for
   * a batch (one slot at a time: what one draws, another cannot take first). A batch the full
   * window would cut short waits instead (none is taken) while outputs the consumer can take, or
   * batches in flight, will open the window: so a slow consumer does not split the map into
   * smaller batches than it sized (nor a `chunkSize` into odd ones).
   */
  async #take(wanted: number): Promise<Item[]> {
    while (this.#drawing) await this.#drawing;
    const window = 2 * this.count * this.#sizer.largest;
    let draw: (value?: void) => void = () => undefined;
    this.#drawing = new Promise<void>((resolve) => (draw = resolve));
    try {
      while (
        this.#queue.length < wanted &&
        !this.#exhausted &&
        this.#drawn - this.#handed < window
      ) {
        const next = await this.inputs.next();
        if (next.done === true) this.#exhausted = true;
        else {
          this.#queue.push({ index: this.#drawn, args: next.value, ranFailures: 0 });
          this.#drawn += 1;
        }
      }
      if (this.#queue.length < wanted && !this.#exhausted && this.#windowOpens()) return [];
      return this.#queue.splice(0, wanted);
    } finally {
      this.#drawing = undefined;
      draw();
    }
  }

  /**
   * Whether the window of inputs drawn ahead will open without a new batch: outputs wait that the
   * consumer can take (in order, when the map orders them), or batches are in flight (their
   * outputs come). Else a short batch goes: waiting could wait forever.
   */
  #windowOpens(): boolean {
    const released = this.options.orderOutputs === false ? this.completed : this.#emitted;
    return released > this.#handed || this.inFlight > 0;
  }

  async #nextBatch(slot: Slot): Promise<Item[] | null> {
    const idleSince = performance.now();
    while (!this.stop.aborted) {
      // What is left is shared among the slots the work wants (before the inputs' time is known,
      // among as many as the room allows: a first fast input must not hand one slot the share of
      // the few opened so far).
      const known = this.#sizer.slotEstimate(SAMPLES_TO_OPEN_SLOTS) !== undefined;
      const slots = Math.max(this.#slots.length, known ? this.#wanted() : this.count);
      const now = performance.now();
      const estimate = this.#sizer.estimate;
      let unfinished = this.#owners.size;
      for (const other of this.#slots) unfinished -= this.#doneOf(other, now, estimate);
      const own = slot.pending - this.#doneOf(slot, now, estimate);
      const size = this.#sizer.next(slot.lastSize, this.#remaining(), slots, unfinished, own);
      // None now (0): the slot holds its share already, and takes more once it ran some.
      const batch = size > 0 ? await this.#take(size) : [];
      if (batch.length > 0) {
        if (slot.pending === 0) slot.since = now;
        slot.lastSize = batch.length;
        slot.pending += batch.length;
        for (const item of batch) this.#owners.set(item.index, slot);
        return batch;
      }
      if (this.#exhausted && (size > 0 || this.#queue.length === 0)) return null;
      // Nothing to run now (results wait for an earlier input, or inputs come slowly): after
      // IDLE_RELEASE_MS the slot's container goes back.
      if (performance.now() - idleSince >= IDLE_RELEASE_MS) this.#release(slot);
      await this.#changed(100);
    }
    return null;
  }

  /**
   * What the inputs `slot` runs now have done, in inputs: their time so far over the inputs'
   * time (`estimate`, seconds). Shares count it: a slot whose input ended a moment ago would
   * otherwise hold a whole input less than one whose input is about to end, and take one more.
   */
  #doneOf(slot: Slot, now: number, estimate: number | undefined): number {
    if (slot.pending === 0 || estimate === undefined || estimate <= 0) return 0;
    const running = Math.min(this.#parallel, slot.pending);
    return running * Math.min(1, (now - slot.since) / 1000 / estimate);
  }

  /** Resolves when something changed (an output, a stop), or after `ms`. */
  #changed(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stop.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.stop.addEventListener('abort', done, { once: true });
      this.#wake.push(done);
    });
  }

  /** Gives the slot's container back now (its session ended) and moves it to a new session. */
  #release(slot: Slot): void {
    const index = slot.used.indexOf(slot.sessionId);
    if (slot.sessionId === '' || index < 0 || slot.running > 0) return;
    slot.used.splice(index, 1);
    this.#ending.push(this.deps.endSession(slot.sessionId).catch(() => undefined));
    slot.sessionId = newSessionId();
  }

  /**
   * Moves the slot to a new session; given the session a failed call used, only if the slot is
   * still on it (its other batch, failing the same way, renewed it already).
   */
  #renew(slot: Slot, failed?: string): void {
    if (slot.sessionId !== '' && (failed === undefined || failed === slot.sessionId)) {
      slot.sessionId = newSessionId();
    }
  }

  async #runSlot(slot: Slot): Promise<void> {
    const underWay: Promise<void>[] = [];
    for (;;) {
      if (underWay.length >= this.#depth(slot)) {
        if (!this.#grown) {
          // The next batch may go before this one ends once enough inputs were measured: the
          // slot looks again then.
          const ended = await this.#batchEndOrGrowth(underWay[0]!);
          if (!ended) continue;
        }
        await underWay.shift();
        // Calls wait in the router's queue (this map's or other tenants'): an idle container
        // kept for this slot's session would hold a slot they wait for.
        if (this.#queuedBatches > 0 || this.#othersWaiting) this.#release(slot);
        this.#openSlots();
        continue;
      }
      const batch = await this.#nextBatch(slot);
      if (batch === null) break;
      const running = this.#runBatch(slot, batch);
      // Awaited in turn below; a failure of the second one is not unhandled meanwhile.
      running.catch(() => undefined);
      underWay.push(running);
    }
    for (const running of underWay) await running;
    this.#release(slot);
  }

  /**
   * Resolves true once `batch` ended (or failed), false if the map grew first (`#grown`); its
   * waiter leaves `#growWaiters` either way, so a map that never grows keeps none.
   */
  #batchEndOrGrowth(batch: Promise<void>): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const grew = () => resolve(false);
      this.#growWaiters.add(grew);
      const ended = () => {
        this.#growWaiters.delete(grew);
        resolve(true);
      };
      batch.then(ended, ended);
    });
  }

  /**
   * How many of the slot's batches may be on the cluster at once: two (the next one waits for its
   * session's turn at the router, which starts it the moment the one before ends, where the client
   * would take a round trip to send it) when the slot keeps a session, the map has opened the
   * slots its work wants, no other calls wait for room and a batch is known to take under
   * PIPELINE_SECONDS; else one.
   */
  #depth(slot: Slot): number {
    const estimate = this.#sizer.estimate;
    if (slot.sessionId === '' || this.#queuedBatches > 0 || this.#othersWaiting) return 1;
    if (estimate === undefined) return 1;
    if (!this.#knowsInputs() || this.#slots.length < this.#wanted()) {
      // Slots are still opening: a batch taken now is sized by too few slots (a share of what is
      // left among them), and a second one would hold inputs the new slots could run.
      return 1;
    }
    const batchSeconds =
      ((estimate + INPUT_OVERHEAD_SECONDS) * Math.max(1, slot.lastSize)) / this.#parallel;
    return batchSeconds < PIPELINE_SECONDS ? 2 : 1;
  }

  /**
   * Whether the map knows its inputs well enough for a slot to have two batches on the cluster
   * (`#depth`): the slots its work wants are known, and it measured SAMPLES_TO_GROW inputs itself
   * (a map that starts from an earlier one's times sends no second batch before: those times may
   * not be its inputs', and a slot would hold twice what they sized before it knew).
   */
  #knowsInputs(): boolean {
    return (
      this.#sizer.measured >= SAMPLES_TO_GROW &&
      this.#sizer.slotEstimate(SAMPLES_TO_OPEN_SLOTS) !== undefined
    );
  }

  async #runBatch(slot: Slot, batch: Item[]): Promise<void> {
    slot.running += 1;
    try {
      let items = batch;
      while (items.length > 0 && !this.stop.aborted) {
        const failure = await this.#attempt(slot, items);
        if (failure === null) break;
        const [next, waitMs] = this.#after(slot, failure);
        items = next;
        if (items.length > 0 && waitMs > 0) await sleep(waitMs, this.stop);
      }
    } finally {
      slot.running -= 1;
    }
  }

  /** Inputs of this map waiting in the router's admission queue changed by `change`. */
  #queuedChange(change: number): void {
    this.#queuedBatches += change > 0 ? 1 : -1;
    this.progress.queued += change;
    this.progress.draw(false);
  }

  #after(slot: Slot, failure: Failure): [Item[], number] {
    const { error, unfinished, sessionId } = failure;
    if (error instanceof SessionExpiredError && error.notStarted && slot.sessionId !== '') {
      this.#renew(slot, sessionId);
      return [unfinished, 0];
    }
    if (waitsForRoom(error, slot.unavailable)) {
      if (error.code === Status.UNAVAILABLE) slot.unavailable += 1;
      const wait = backoffMs(slot.refusals, error.retryAfterMs);
      slot.refusals += 1;
      return [unfinished, wait];
    }
    if (needsNewSession(error)) this.#renew(slot, sessionId);
    if (error instanceof NeverFitsError) this.#neverFits = error;
    const again: Item[] = [];
    for (const item of unfinished) {
      if (item.ranFailures < (this.options.retries ?? 0) && mayRetryRan(error)) {
        item.ranFailures += 1;
        again.push(item);
      } else this.#fail(item, copyOf(error));
    }
    return [again, 0];
  }

  /** One call carrying `items`; null when every input got its outcome. */
  async #attempt(slot: Slot, batch: Item[]): Promise<Failure | null> {
    if (this.#neverFits !== undefined) {
      // The same budget never fits for any input: none is sent again.
      for (const item of batch) this.#fail(item, copyOf(this.#neverFits));
      return null;
    }
    // An input whose arguments do not encode fails alone; the batch carries the others.
    const encoded: string[] = [];
    const items: Item[] = [];
    for (const item of batch) {
      try {
        encoded.push(encodeJsonInput(item.args, item.index));
        items.push(item);
      } catch (error) {
        this.#deliver(item.index, { index: item.index, ok: false, error });
      }
    }
    if (items.length === 0) return null;
    const sessionId = slot.sessionId;
    // The first inputs of a new session's first call run first in a new container.
    const fresh = sessionId !== '' && !slot.used.includes(sessionId);
    if (fresh) slot.used.push(sessionId);
    const reader = new OutcomeReader(items.length);
    let broken: ProtocolError | undefined;
    let call: RemoteCall<unknown> | undefined;
    const onChunk = (data: Buffer, info: CallInfo) => {
      if (broken) return;
      let outcomes;
      try {
        outcomes = reader.feed(data);
      } catch (error) {
        broken = error as ProtocolError;
        call?.cancel(broken);
        return;
      }
      for (const outcome of outcomes) {
        const item = items[outcome.index]!;
        this.#sizer.observe(outcome.seconds, !fresh || outcome.index >= this.#parallel);
        if (!this.#grown && this.#knowsInputs()) {
          // Slots waiting for their batch to end may send their next one now.
          this.#grown = true;
          for (const wake of this.#growWaiters) wake();
          this.#growWaiters.clear();
        }
        try {
          const value = decodeJsonEnvelope(outcome.data, info) as T;
          this.#deliver(item.index, { index: item.index, ok: true, value });
        } catch (error) {
          this.#fail(item, error);
        }
      }
      // The inputs' time is known better now: more slots may be worth opening.
      if (this.#slots.length < this.count) this.#openSlots();
      else this.#roomWanted?.();
    };
    let waiting = false;
    const onQueue = (queued: boolean) => {
      if (queued === waiting) return;
      waiting = queued;
      this.#queuedChange(queued ? items.length : -items.length);
    };
    slot.inFlight += 1;
    try {
      call = this.deps.startBatch(
        this.fn,
        encoded,
        sessionId,
        this.options,
        this.stop,
        onChunk,
        onQueue,
      );
      await call.result;
    } catch (error) {
      // Stopped: the map ends (its caller says how); nothing more of these inputs.
      if (this.stop.aborted) return null;
      const unfinished = items.filter((_, i) => !reader.answered(i));
      if (broken) {
        for (const item of unfinished) this.#fail(item, copyOf(broken));
        return null;
      }
      return { error, unfinished, sessionId };
    } finally {
      slot.inFlight -= 1;
      if (waiting) onQueue(false);
    }
    slot.refusals = 0;
    slot.unavailable = 0;
    for (const [i, item] of items.entries()) {
      if (!reader.answered(i)) {
        this.#fail(
          item,
          new ProtocolError("the cluster ended the batch without this input's outcome", {
            call: call.info,
          }),
        );
      }
    }
    return null;
  }
}
