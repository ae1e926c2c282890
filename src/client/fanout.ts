/**
 * Fan-out in the TypeScript client: `map` / `starmap` over many inputs and `spawn` handles (the
 * Python client's `fn.map`, `fn.starmap` and `fn.spawn`, the same rules). A map keeps as many calls
 * in flight as the cluster lets this tenant (`TenantService.Slots` for the call's budget, at most
 * `maxConcurrency`); each concurrency slot is a session of its own (one warm container), ended
 * when the map ends; `isolateInputs` gives every input a fresh container. Inputs are drawn lazily
 * (at most one per slot ahead of the results handed out, two when results come in order);
 * refusals for lack of room are waited out (`retry.ts`); the first failure rejects (its message
 * and `inputIndex` name the input) unless `returnExceptions` puts it in place.
 */
import { newSessionId } from './call-info.js';
import type { CallDemandOptions } from './call-config.js';
import { CallCancelledError, ReadieError, SessionExpiredError } from './errors.js';
import type { ModuleFunction, SourceFunction } from './json-call.js';
import { MapProgress } from './progress.js';
import type { RemoteCall, RemoteLogLine } from './remote-call.js';
import { backoffMs, mayRetryRan, needsNewSession, waitsForRoom } from './retry.js';
import { status as Status } from '@grpc/grpc-js';

/** The most calls a map keeps in flight when `maxConcurrency` does not say. */
export const MAX_DEFAULT_CONCURRENCY = 256;
/** Calls in flight when the router cannot say how many slots the tenant has (an older router). */
export const CONCURRENCY_WHEN_UNKNOWN = 4;
/**
 * A slot with no input to run for this long gives its container back (ms); at once when the
 * inputs are exhausted. Idle, its session container would hold a slot another input (of this map
 * or another) may be waiting for: two maps could otherwise wait for each other.
 */
export const IDLE_RELEASE_MS = 1_000;

/** A Python function to map, without arguments (each input brings its own). */
export type MappedFunction = (ModuleFunction | SourceFunction) & {
  /** Keyword arguments passed to every call. */
  readonly kwargs?: Readonly<Record<string, unknown>>;
};

/** Options of a map: its calls' demand, and how the map runs. */
export interface MapOptions extends CallDemandOptions {
  /** Results in input order (default), or as they complete. */
  readonly orderOutputs?: boolean;
  /** Yield a failed input's error in its place instead of rejecting at the first failure. */
  readonly returnExceptions?: boolean;
  /** At most this many calls in flight (default: the tenant's usable slots, at most 256). */
  readonly maxConcurrency?: number;
  /** A fresh container for every input (default: one container per concurrency slot). */
  readonly isolateInputs?: boolean;
  /** A progress bar on stderr (default: when stderr is a terminal). */
  readonly progress?: boolean;
  /** Retry an input whose call ran and failed this many times (default 0). */
  readonly retries?: number;
  /** Aborting it cancels the calls in flight and ends the map with CallCancelledError. */
  readonly signal?: AbortSignal;
  /** Called with each log line of every call. */
  readonly onLog?: (line: RemoteLogLine) => void;
}

/** What the fan-out needs of the client. */
export interface FanOutDeps {
  /** Starts one call (in `sessionId`, or outside sessions when empty). */
  start<T>(
    fn: MappedFunction,
    args: readonly unknown[],
    sessionId: string,
    options: MapOptions,
    signal: AbortSignal,
  ): RemoteCall<T>;
  /** The tenant's usable slots for the budget (null when the router cannot say). */
  slots(options: CallDemandOptions): Promise<number | null>;
  /** Ends a session (best effort). */
  endSession(sessionId: string): Promise<unknown>;
}

/** One concurrency slot: its session ('' outside sessions) and the sessions it used. */
export interface FanOutSlot {
  sessionId: string;
  readonly renewable: boolean;
  /** Sessions a call was made in and not ended yet. */
  readonly used: string[];
  /** When it last finished an input (performance.now()). */
  idleSince: number;
}

function newSlot(isolate: boolean): FanOutSlot {
  const sessionId = isolate ? '' : newSessionId();
  return { sessionId, renewable: !isolate, used: [], idleSince: performance.now() };
}

/** The slot's session to end now (idle long enough, or no input left), moving it to a new one. */
function release(slot: FanOutSlot, now: number, exhausted: boolean): string | undefined {
  if (!slot.renewable || !slot.used.includes(slot.sessionId)) return undefined;
  if (!exhausted && now - slot.idleSince < IDLE_RELEASE_MS) return undefined;
  const released = slot.sessionId;
  slot.used.splice(slot.used.indexOf(released), 1);
  renew(slot);
  return released;
}

function renew(slot: FanOutSlot): void {
  if (slot.renewable) slot.sessionId = newSessionId();
}

function indexed(error: unknown, index: number | undefined): unknown {
  if (index === undefined || !(error instanceof ReadieError) || error.inputIndex !== undefined) {
    return error;
  }
  error.inputIndex = index;
  error.message = `input ${index}: ${error.message}`;
  return error;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Runs one input to its end: refusals for lack of room waited out, a call that ran retried `retries` times. */
export async function runInput<T>(
  deps: FanOutDeps,
  fn: MappedFunction,
  args: readonly unknown[],
  index: number | undefined,
  slot: FanOutSlot,
  options: MapOptions,
  signal: AbortSignal,
): Promise<T> {
  let refusals = 0;
  let unavailable = 0;
  let ranFailures = 0;
  for (;;) {
    if (signal.aborted) throw new CallCancelledError('the call was cancelled by the client');
    if (slot.sessionId !== '' && !slot.used.includes(slot.sessionId))
      slot.used.push(slot.sessionId);
    try {
      return await deps.start<T>(fn, args, slot.sessionId, options, signal).result;
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof SessionExpiredError && error.notStarted && slot.renewable) {
        renew(slot);
        continue;
      }
      if (waitsForRoom(error, unavailable)) {
        if (error.code === Status.UNAVAILABLE) unavailable += 1;
        await sleep(backoffMs(refusals, error.retryAfterMs), signal);
        refusals += 1;
        continue;
      }
      if (needsNewSession(error)) renew(slot);
      if (ranFailures < (options.retries ?? 0) && mayRetryRan(error)) {
        ranFailures += 1;
        continue;
      }
      throw indexed(error, index);
    }
  }
}

function bounded(slots: number | null, options: MapOptions, total: number | undefined): number {
  const limit = options.maxConcurrency;
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
    throw new RangeError(`maxConcurrency must be a positive integer, not ${String(limit)}`);
  }
  let wanted =
    slots === null
      ? (limit ?? CONCURRENCY_WHEN_UNKNOWN)
      : Math.min(Math.max(1, slots), limit ?? MAX_DEFAULT_CONCURRENCY);
  if (total !== undefined) wanted = Math.min(wanted, Math.max(1, total));
  return Math.max(1, wanted);
}

type Outcome<T> = { readonly index: number; readonly slot: FanOutSlot } & (
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }
);

/** The results of `fn` over `inputs` (argument lists), as an async iterator. */
export async function* runMap<T>(
  deps: FanOutDeps,
  fn: MappedFunction,
  inputs: Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]>,
  total: number | undefined,
  options: MapOptions,
): AsyncGenerator<T | ReadieError, void, undefined> {
  const retries = options.retries ?? 0;
  if (!Number.isInteger(retries) || retries < 0) {
    throw new RangeError(`retries must be a non-negative integer, not ${String(retries)}`);
  }
  const count = bounded(await deps.slots(options).catch(() => null), options, total);
  const ordered = options.orderOutputs ?? true;
  const slots = Array.from({ length: count }, () => newSlot(options.isolateInputs ?? false));
  const free = [...slots];
  const window = count * (ordered ? 2 : 1);
  const stop = new AbortController();
  const onAbort = () => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) stop.abort(options.signal.reason);
  const pending = new Map<number, Promise<Outcome<T>>>();
  const ready = new Map<number, Outcome<T>>();
  const progress = new MapProgress(`readie map ${fn.function}`, total, options.progress);
  const iterator =
    Symbol.asyncIterator in inputs ? inputs[Symbol.asyncIterator]() : inputs[Symbol.iterator]();
  let drawn = 0;
  let handed = 0;
  let exhausted = false;
  let completedAll = false;
  const stopped = aborted(stop.signal);
  const ending: Promise<unknown>[] = [];
  try {
    for (;;) {
      if (stop.signal.aborted) throw cancelledMap(fn, progress.done, total, pending.size);
      while (free.length > 0 && !exhausted && drawn - handed < window) {
        const next = await iterator.next();
        if (next.done === true) {
          exhausted = true;
          break;
        }
        const slot = free.shift() as FanOutSlot;
        const index = drawn;
        pending.set(
          index,
          runInput<T>(deps, fn, next.value, index, slot, options, stop.signal).then(
            (value): Outcome<T> => ({ index, slot, ok: true, value }),
            (error: unknown): Outcome<T> => ({ index, slot, ok: false, error }),
          ),
        );
        drawn += 1;
      }
      const now = performance.now();
      for (const slot of free) {
        const released = release(slot, now, exhausted);
        if (released !== undefined) ending.push(deps.endSession(released).catch(() => undefined));
      }
      if (pending.size === 0 && exhausted && ready.size === 0) {
        completedAll = true;
        return;
      }
      const outcome = await Promise.race([...pending.values(), stopped]);
      if (outcome === null) continue;
      pending.delete(outcome.index);
      outcome.slot.idleSince = performance.now();
      free.push(outcome.slot);
      progress.advance(!outcome.ok);
      const out: Outcome<T>[] = [];
      if (ordered) {
        ready.set(outcome.index, outcome);
        for (let next = ready.get(handed); next !== undefined; next = ready.get(handed)) {
          ready.delete(handed);
          out.push(next);
          handed += 1;
        }
      } else {
        out.push(outcome);
        handed += 1;
      }
      for (const item of out) {
        if (item.ok) yield item.value;
        else if (options.returnExceptions === true && item.error instanceof ReadieError) {
          yield item.error;
        } else throw item.error;
      }
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    if (!completedAll) stop.abort(new CallCancelledError('the map ended early'));
    await Promise.allSettled(pending.values());
    progress.close();
    const sessions = slots.flatMap((slot) => slot.used);
    await Promise.allSettled([
      ...ending,
      ...sessions.map((sessionId) => deps.endSession(sessionId)),
    ]);
    if (typeof iterator.return === 'function' && !exhausted) await iterator.return();
  }
}

function aborted(signal: AbortSignal): Promise<null> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(null);
    else signal.addEventListener('abort', () => resolve(null), { once: true });
  });
}

function cancelledMap(
  fn: MappedFunction,
  completed: number,
  total: number | undefined,
  inFlight: number,
): CallCancelledError {
  const of = total === undefined ? '' : ` of ${total}`;
  return new CallCancelledError(
    `the map of ${fn.function} was cancelled: ${completed}${of} inputs completed, ${inFlight} calls in flight cancelled`,
  );
}

/**
 * A call started with `spawn`, running in the background: `get()` waits for its result (at most
 * `timeoutMs`), `cancel()` cancels it on the cluster, `done` says whether it ended. Refusals for
 * lack of room are waited out, as in a map.
 */
export class SpawnedCall<T = unknown> {
  /** The value, or the error the call failed with. */
  readonly result: Promise<T>;
  #done = false;
  readonly #stop = new AbortController();

  /** Made by `ReadieClient.spawn`. */
  constructor(run: (signal: AbortSignal) => Promise<T>) {
    this.result = run(this.#stop.signal).finally(() => (this.#done = true));
    this.result.catch(() => undefined);
  }

  /** Whether the call ended (with a result, an error, or cancelled). */
  get done(): boolean {
    return this.#done;
  }

  /** The result; rejects with TimeoutError-like `RangeError` when not done within `timeoutMs` (the call goes on). */
  get(timeoutMs?: number): Promise<T> {
    if (timeoutMs === undefined) return this.result;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new SpawnTimeoutError(
              `the spawned call is not done after ${timeoutMs} ms (it goes on)`,
            ),
          ),
        timeoutMs,
      );
    });
    return Promise.race([this.result, late]).finally(() => clearTimeout(timer));
  }

  /** Cancels the call on the cluster; its result rejects with CallCancelledError. */
  cancel(reason?: unknown): boolean {
    if (this.#done) return false;
    this.#stop.abort(reason);
    return true;
  }
}

/** `SpawnedCall.get` ran out of time; the call goes on. */
export class SpawnTimeoutError extends Error {
  override readonly name = 'SpawnTimeoutError';
}
