/**
 * Fan-out in the TypeScript client: `map` / `starmap` over many inputs and `spawn` handles (the
 * Python client's `fn.map`, `fn.starmap` and `fn.spawn`, the same rules). A map sends its inputs
 * in batches (`map-engine.ts`): at most as many batches in flight as the cluster lets this tenant
 * (`TenantService.Slots` for the call's budget, at most `maxConcurrency`); each concurrency slot
 * is a session of its own (one warm container), ended when the map ends; `isolateInputs` gives
 * every input a fresh container. Inputs are drawn lazily; refusals for lack of room are waited
 * out (`retry.ts`); the first failure rejects (its message and `inputIndex` name the input)
 * unless `returnExceptions` puts it in place. A spawned call runs alone (`runInput`).
 */
import { setMaxListeners } from 'node:events';
import { newSessionId } from './call-info.js';
import { CallCancelledError, ReadieError, SessionExpiredError } from './errors.js';
import { MapProgress } from './progress.js';
import type { RemoteCall } from './remote-call.js';
import { backoffMs, mayRetryRan, needsNewSession, waitsForRoom } from './retry.js';
import { status as Status } from '@grpc/grpc-js';
import { InputEncodingError, MAX_BATCH_INPUTS, MAX_INPUTS_AT_ONCE } from './batches.js';
import { MapEngine, type BatchDeps } from './map-engine.js';

import { bounded, roomFor } from './map-room.js';
export { CONCURRENCY_WHEN_UNKNOWN, MAX_DEFAULT_CONCURRENCY, type MapRoom } from './map-room.js';

import type { MapOptions, MappedFunction } from './map-options.js';
export type { MapOptions, MappedFunction } from './map-options.js';

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
  /** What a map of the budget may use now (rejects when the router cannot say). */
  room: BatchDeps['room'];
  /** Ends a session (best effort). */
  endSession(sessionId: string): Promise<unknown>;
  /** Starts one batch of `fn` over `inputs` (argument lists) in `sessionId`. */
  startBatch: BatchDeps['startBatch'];
  /** The inputs' times each function's last map measured (the client's). */
  readonly inputTimes: BatchDeps['inputTimes'];
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

function checkedBatchOptions(options: MapOptions): void {
  const { chunkSize, maxInputs } = options;
  if (
    chunkSize !== undefined &&
    (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_BATCH_INPUTS)
  ) {
    throw new RangeError(
      `chunkSize must be a whole number from 1 to ${MAX_BATCH_INPUTS}, not ${String(chunkSize)}`,
    );
  }
  if (
    maxInputs !== undefined &&
    (!Number.isInteger(maxInputs) || maxInputs < 1 || maxInputs > MAX_INPUTS_AT_ONCE)
  ) {
    throw new RangeError(
      `maxInputs must be a whole number from 1 to ${MAX_INPUTS_AT_ONCE}, not ${String(maxInputs)}`,
    );
  }
}

/** The results of `fn` over `inputs` (argument lists), as an async iterator; in batches. */
export async function* runMap<T>(
  deps: FanOutDeps,
  fn: MappedFunction,
  inputs: Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]>,
  total: number | undefined,
  options: MapOptions,
): AsyncGenerator<T | ReadieError | InputEncodingError, void, undefined> {
  const retries = options.retries ?? 0;
  if (!Number.isInteger(retries) || retries < 0) {
    throw new RangeError(`retries must be a non-negative integer, not ${String(retries)}`);
  }
  checkedBatchOptions(options);
  const room = await deps.room(options).catch(() => null);
  const count = bounded(roomFor(room, options), options, total);
  const stop = new AbortController();
  // Every call in flight listens on it (removed when the call ends): a map against a router that
  // queues may have hundreds at once, which is no leak; Node would warn past 10.
  setMaxListeners(0, stop.signal);
  const onAbort = () => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) stop.abort(options.signal.reason);
  const progress = new MapProgress(`readie map ${fn.function}`, total, options.progress);
  const iterator =
    Symbol.asyncIterator in inputs ? inputs[Symbol.asyncIterator]() : inputs[Symbol.iterator]();
  const engine = new MapEngine<T>(
    deps,
    fn,
    iterator,
    total,
    options,
    count,
    progress,
    stop.signal,
    room?.othersWaiting ?? false,
  );
  let completedAll = false;
  const stopped = aborted(stop.signal);
  try {
    const outputs = engine.outputs();
    for (;;) {
      if (stop.signal.aborted) {
        throw cancelledMap(fn, engine.completed, total, engine.inFlight);
      }
      const next = await Promise.race([outputs.next(), stopped]);
      if (next === null) continue;
      if (next.done === true) break;
      const item = next.value;
      if (item.ok) yield item.value;
      else if (
        options.returnExceptions === true &&
        (item.error instanceof ReadieError || item.error instanceof InputEncodingError)
      ) {
        yield item.error;
      } else throw item.error;
    }
    completedAll = true;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    if (!completedAll) stop.abort(new CallCancelledError('the map ended early'));
    if (completedAll) {
      // Every result is out: the map's sessions end in the background (their containers go
      // within a round trip; Node keeps running until they did).
      void engine.endSessions();
    } else await engine.endSessions();
    progress.close();
    if (typeof iterator.return === 'function' && !completedAll) await iterator.return();
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
