/**
 * How many calls a map may have in flight (docs/clients.md, "Concurrency follows the cluster"):
 * what the router says the map may use now (`TenantService.Slots`), bounded by the map's options
 * and its inputs. The Python client's rules (`python/readie/_map_options.py`).
 */
import type { MapOptions } from './map-options.js';

/** The most calls a map keeps in flight when `maxConcurrency` does not say. */
export const MAX_DEFAULT_CONCURRENCY = 256;
/** Calls in flight when the router cannot say how many slots the tenant has (an older router). */
export const CONCURRENCY_WHEN_UNKNOWN = 4;

/** What the router says a map of a budget may use now. */
export interface MapRoom {
  /** Its free slots for the budget. */
  readonly slots: number;
  /** The calls its admission queue keeps waiting beside them (`maxQueued`; 0: it does not queue). */
  readonly queued: number;
  /** Whether other tenants' calls wait in that queue now. */
  readonly othersWaiting: boolean;
}

/**
 * The calls a map may have in flight by the router's answer (null: it could not say). Its slots
 * are sessions, each keeping one container across its batches, so a map opens no more of them
 * than the free slots: more would only wait for containers that each batch gives back. A map of
 * `isolateInputs` (a fresh container per input, none kept) may also fill the router's admission
 * queue (`maxQueued`), where its calls wait their fair turn.
 */
export function roomFor(room: MapRoom | null, options: MapOptions): number | null {
  if (room === null) return null;
  return room.slots + (options.isolateInputs === true ? room.queued : 0);
}

/** `slots` bounded by `maxConcurrency` (else MAX_DEFAULT_CONCURRENCY) and the inputs; at least 1. */
export function bounded(
  slots: number | null,
  options: MapOptions,
  total: number | undefined,
): number {
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
