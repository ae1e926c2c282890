/**
 * Container slots (WORKER_MAX_EXECUTORS): a slot is held by each container held for a call or a
 * session and by each being started for a call; a container being destroyed holds none. Standbys
 * never keep a call out: they fill only slots no call holds, and one gives its slot up when a call
 * needs it. The router counts slots the same way. Pure: the pool passes its counts.
 */
import { ContainerUnavailableError } from '../errors.js';
import type { ContainerLifecycle } from './lifecycle.js';

/** A pool's slots as the rules read them. */
export interface SlotCount {
  /** The most containers held or starting for calls at once; 0 for no limit. */
  readonly maxContainers: number;
  /** Slots held for calls and sessions (`slotsHeld`). */
  readonly held: number;
  /** Standbys on the shelf and being restored: the slots they fill. */
  readonly standbys: number;
}

/** Whether a new call may start a container, and whether a standby gives its slot up for it. */
export type CallAdmission =
  | { readonly admitted: true; readonly standbyGivesUp: boolean }
  | { readonly admitted: false; readonly refusal: ContainerUnavailableError };

/** The slots held: each container held that is not being destroyed, and each being started. */
export function slotsHeld(
  starting: number,
  held: Iterable<{ readonly state: ContainerLifecycle }>,
): number {
  let slots = starting;
  for (const container of held) if (container.state !== 'removed') slots += 1;
  return slots;
}

/** Whether a call may start one more container now. */
export function admitCall(slots: SlotCount): CallAdmission {
  const { maxContainers, held, standbys } = slots;
  if (maxContainers > 0 && held >= maxContainers) {
    return {
      admitted: false,
      refusal: new ContainerUnavailableError(
        `this worker already holds ${held} containers, its limit (WORKER_MAX_EXECUTORS=${maxContainers})`,
      ),
    };
  }
  // The call's own slot counts from now: a standby gives one up when the two no longer fit.
  return {
    admitted: true,
    standbyGivesUp: maxContainers > 0 && held + 1 + standbys > maxContainers,
  };
}

/** How many more standbys fit in the slots no call holds (Infinity without a limit). */
export function standbyRoom(slots: SlotCount): number {
  return slots.maxContainers > 0
    ? slots.maxContainers - slots.held - slots.standbys
    : Number.POSITIVE_INFINITY;
}
