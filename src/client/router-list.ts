/**
 * A client's list of router addresses (`READIE_ADDRESS=a:50051,b:50051`): which router the next
 * call goes to, and where a call refused before it was sent moves. A standby's refusal
 * (`UNAVAILABLE`, `readie-not-started: 1`) names the leader in `readie-leader`: the call moves
 * there when that address is in the list (no router can send a client elsewhere), else to the next
 * address. A router that cannot be reached at all (nothing listens, the name does not resolve, no
 * connection was ever made) is left for the next address the same way, until every address was
 * found unreachable. A call that may have
 * started (any other failure) never moves: its error is the caller's.
 */
import { status as Status } from '@grpc/grpc-js';
import { ReadieError } from './errors.js';
import { backoffMs } from './retry.js';
import { transportProblemOf } from '../shared/transport-problem.js';

/** How many moves between routers one call makes at most before its last refusal is raised. */
export const MAX_ROUTER_MOVES = 24;

/**
 * A call moves only while at least this much of its timeout is left after the wait (ms): a try the
 * deadline cuts short would end DEADLINE_EXCEEDED and hide why the call was refused.
 */
export const MOVE_MARGIN_MS = 500;

/** One router of the list, with whatever the client keeps for it (its gRPC stubs). */
export interface RouterEntry<T> {
  readonly address: string;
  readonly stubs: T;
}

/** What a refusal before anything was sent says: a standby refused, or nothing could be reached. */
export type UnsentRefusal = 'standby' | 'unreachable';

/**
 * Whether `error` refused the call before any of it was sent, and how: a standby's refusal
 * (`UNAVAILABLE`, not started, with `readie-standby` or `readie-leader`), or a router that could
 * not be reached. Undefined for every other failure (the call may have started).
 */
export function unsentRefusal(error: unknown): UnsentRefusal | undefined {
  if (!(error instanceof ReadieError) || error.code !== Status.UNAVAILABLE) return undefined;
  if (error.notStarted && (error.standby || error.leader !== undefined)) return 'standby';
  const problem = transportProblemOf(error.details);
  if (problem === 'refused' || problem === 'unresolved') return 'unreachable';
  return /No connection established/i.test(error.details) ? 'unreachable' : undefined;
}

/**
 * The routers of one client, and the one it prefers (the last that served or was named leader).
 * Stubs are made on first use of an address.
 */
export class RouterList<T> {
  readonly addresses: readonly string[];
  readonly #make: (address: string) => T;
  readonly #stubs = new Map<string, T>();
  #preferred = 0;

  /** `addresses` must hold at least one; `make` builds an address's stubs when first used. */
  constructor(addresses: readonly string[], make: (address: string) => T) {
    if (addresses.length === 0) throw new RangeError('a router list needs at least one address');
    this.addresses = addresses;
    this.#make = make;
  }

  /** The router a new call goes to. */
  get current(): RouterEntry<T> {
    return this.entry(this.#preferred);
  }

  /** Every address's stubs made so far (to close them). */
  get made(): readonly T[] {
    return [...this.#stubs.values()];
  }

  /** The entry at `index` of the list. */
  entry(index: number): RouterEntry<T> {
    const address = this.addresses[index] as string;
    let stubs = this.#stubs.get(address);
    if (stubs === undefined) {
      stubs = this.#make(address);
      this.#stubs.set(address, stubs);
    }
    return { address, stubs };
  }

  /**
   * Where a call refused unsent at `from` goes next: the leader it named, when listed, else the
   * next address (wrapping). Later calls start there too.
   */
  moveFrom(from: string, leader: string | undefined): RouterEntry<T> {
    const named = leader === undefined ? -1 : this.addresses.indexOf(leader);
    const at = this.addresses.indexOf(from);
    const index = named >= 0 && named !== at ? named : (at + 1) % this.addresses.length;
    this.#preferred = index;
    return this.entry(index);
  }

  /**
   * Ms to wait before move `move` (0-based): none while the list has addresses not tried in this
   * pass, a backoff after each full pass (a failover leaves no leader for up to LEADER_LEASE).
   */
  waitBefore(move: number, random: () => number = Math.random): number {
    const pass = Math.floor((move + 1) / this.addresses.length);
    return (move + 1) % this.addresses.length === 0 ? backoffMs(pass + 2, undefined, random) : 0;
  }
}
