/**
 * What a failed call's trailers say about the user's function, on the wire between worker, router
 * and clients (docs/clients.md, "Retrying"). Plain names and values, no transport: the shells put
 * them into and read them out of their metadata.
 *
 * - `readie-not-started: 1`: the call was refused before the user's function started (placement,
 *   a busy session, credentials, a malformed stream, a worker that could not be reached or that
 *   refused the call before running it). A client may retry exactly these calls.
 * - `readie-killed: out-of-memory`: the function ran and was killed, here for exceeding its memory
 *   budget (`readie-memory-budget`, in bytes); the status is `RESOURCE_EXHAUSTED`.
 * - `readie-queued: 1` (with `readie-not-started: 1`): the call waited in the router's admission
 *   queue for `QUEUE_TIMEOUT` and left it unplaced (`RESOURCE_EXHAUSTED`). Final: the router
 *   waited already, so a client does not retry it by itself.
 * - `readie-never-fits: 1` (with `readie-not-started: 1`): no ready worker could ever take the
 *   call (`RESOURCE_EXHAUSTED`, the message naming the largest offer). Final: waiting cures
 *   nothing, so a client never retries it.
 */
import { INPUTS_RAISED_TRAILER, RAISED_MESSAGE_TRAILER, RAISED_TRAILER } from './raised.js';

/** The trailer that marks a refusal before the user's function started. */
export const NOT_STARTED_TRAILER = 'readie-not-started';
/** The trailer of a standby router's refusal: the address of the router that leads. */
export const LEADER_TRAILER = 'readie-leader';
/** The trailer that marks a standby router's refusal (`1`), whether or not a router leads. */
export const STANDBY_TRAILER = 'readie-standby';
/** The trailer of a refusal no wait can cure: no ready worker could ever take the call. */
export const NEVER_FITS_TRAILER = 'readie-never-fits';
/** The trailer of a call that waited `QUEUE_TIMEOUT` in the admission queue (final). */
export const QUEUED_TRAILER = 'readie-queued';
/** The trailer of a call whose function ran and was killed; its value says why. */
export const KILLED_TRAILER = 'readie-killed';
/** The memory budget, in bytes, of a call killed for exceeding it. */
export const MEMORY_BUDGET_TRAILER = 'readie-memory-budget';
/** Why a call was killed: it exceeded its memory budget. */
export const KILLED_OUT_OF_MEMORY = 'out-of-memory';

/** Trailers to send with (or read from) a failed call's status: name to value. */
export type CallTrailers = Readonly<Record<string, string>>;

/** No trailers. */
export const NO_TRAILERS: CallTrailers = {};

/** The trailers of a refusal before the user's function started. */
export const NOT_STARTED: CallTrailers = { [NOT_STARTED_TRAILER]: '1' };

/** The trailers of a refusal of a call that never fits: not started, and final. */
export const NEVER_FITS: CallTrailers = { [NOT_STARTED_TRAILER]: '1', [NEVER_FITS_TRAILER]: '1' };

/** The trailers of a call that waited `QUEUE_TIMEOUT` in the admission queue: not started, final. */
export const QUEUE_TIMED_OUT: CallTrailers = { [NOT_STARTED_TRAILER]: '1', [QUEUED_TRAILER]: '1' };

/** Whether `trailers` say the call waited `QUEUE_TIMEOUT` in the queue (final: not retried). */
export function queueTimedOutTrailer(trailers: CallTrailers): boolean {
  return trailers[QUEUED_TRAILER] === '1';
}

/** Whether `trailers` say no worker could ever take the call (final: never retried). */
export function neverFitsTrailer(trailers: CallTrailers): boolean {
  return trailers[NEVER_FITS_TRAILER] === '1';
}

/** The trailers of a call killed for exceeding its memory budget of `budget` bytes. */
export function outOfMemoryTrailers(budget: number): CallTrailers {
  return { [KILLED_TRAILER]: KILLED_OUT_OF_MEMORY, [MEMORY_BUDGET_TRAILER]: String(budget) };
}

/** The trailers a router passes on from a worker's status to the client, as they came. */
export const RELAYED_TRAILERS: readonly string[] = [
  NOT_STARTED_TRAILER,
  KILLED_TRAILER,
  MEMORY_BUDGET_TRAILER,
];

/**
 * The trailers a router reads from a worker's status: those it relays, and what the worker
 * reports of the function (`readie-raised`, `readie-raised-message`, and a batch's
 * `readie-inputs-raised`: src/shared/raised.ts), which the router records and never relays (the
 * caller has the exceptions itself).
 */
export const WORKER_TRAILERS: readonly string[] = [
  ...RELAYED_TRAILERS,
  RAISED_TRAILER,
  RAISED_MESSAGE_TRAILER,
  INPUTS_RAISED_TRAILER,
];

/** Whether `trailers` say the call never started. */
export function neverStarted(trailers: CallTrailers): boolean {
  return trailers[NOT_STARTED_TRAILER] === '1';
}
