/** What placement decides: the events to append, and the outcome they record. */
import type { NewEvent } from '../../events/types.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';

/** The call was placed: `events` hold `CallPlaced` (and maybe `SessionUnpinned`, `SessionPinned`). */
export interface PlacedDecision {
  readonly outcome: 'placed';
  readonly events: readonly NewEvent[];
  readonly workerId: string;
  /** The session's container the call reuses; null for a new container. */
  readonly containerId: string | null;
  /** The checkpoint a new container is restored from (or the reused one's); null for cold. */
  readonly checkpointId: string | null;
  readonly packages: readonly string[];
  readonly skippedPackages: readonly string[];
  /** The memory reserved, in bytes. */
  readonly memory: number;
  /** A pinned call's version (docs/tenant-routing.md); null for any other call. */
  readonly version: string | null;
  /** The routing table revision the version was resolved from; null for any other call. */
  readonly routingRevision: number | null;
  /** Whether the worker must load the version first (no holder could take the call). */
  readonly coldLoad: boolean;
}

/**
 * An ID a call named that another tenant owns (a session, or a request ID the router remembers):
 * the router's log says so; the caller is answered as for an ID it could not use, never told whose.
 */
export interface ForeignId {
  readonly kind: 'session' | 'request';
  readonly id: string;
  /** Its owner (null: a call without a tenant). */
  readonly ownerTenantId: string | null;
}

/** The call was refused: `events` hold `CallRejected` (after a `SessionUnpinned` if a pin was dropped). */
export interface RejectedDecision {
  readonly outcome: 'rejected';
  readonly events: readonly NewEvent[];
  readonly code: GrpcCodeName;
  readonly message: string;
  /** A pinned call's resolved version, when it was refused after resolving; else null. */
  readonly version: string | null;
  /** The revision of that resolution; else null. */
  readonly routingRevision: number | null;
  /** For a shed: when to retry, in ms (`ROUTING_RETRY_AFTER`); else null. */
  readonly retryAfterMs: number | null;
  /** Set when the call was refused for naming another tenant's ID. */
  readonly foreign?: ForeignId;
  /**
   * Set when a pinned call was shed because the cold load it needed would outlast its deadline
   * (docs/tenant-routing.md, "Deadlines"): the worker that would have loaded the version, which
   * the router asks to pre-warm it in the background, so the calls that follow find it resident.
   * Not an event: the load shows in the log as the worker's residency reports.
   */
  readonly prewarm?: { readonly workerId: string; readonly version: string };
  /**
   * Set when no worker could take the call (docs/placement.md, "Never fits and not now"):
   * `never`, no ready worker could even empty (final: the clients do not retry it); `not-now`,
   * one could once it has room (the call may wait in the queue).
   */
  readonly fit?: Fit;
  /**
   * For a call that does not fit now: the words it waits with in the admission queue when the
   * queue is in force (absent: its `message`); a pinned call's shed names a retry hint it does
   * not need while it waits.
   */
  readonly waitsWith?: string;
}

/** Why a call found no room: it never fits, or it does not fit now. */
export type Fit = 'never' | 'not-now';

/** Placement's answer for one call. */
export type PlacementDecision = PlacedDecision | RejectedDecision;
