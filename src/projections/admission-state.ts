/**
 * The shape of admission's index of the state (`admission-index.ts` keeps it): each tenant's
 * queued calls in order and the slots each tenant holds.
 */

/** One tenant's queued calls: a list in the order queued, linked through `AdmissionIndex.links`. */
export interface TenantQueue {
  /** Its oldest queued call (request ID). */
  readonly head: string;
  /** Its newest queued call (request ID). */
  readonly tail: string;
  /** How many of its calls wait. */
  readonly count: number;
}

/** A queued call's neighbours among its tenant's queued calls (request IDs; null: none). */
export interface QueueLink {
  readonly previous: string | null;
  readonly next: string | null;
}

/** Admission's index of the state: derived, never logged or snapshotted. */
export interface AdmissionIndex {
  /** Tenants with queued calls (`` for calls without a tenant), by tenant. */
  readonly queues: ReadonlyMap<string, TenantQueue>;
  /** Every queued call's neighbours within its tenant, by request ID. */
  readonly links: ReadonlyMap<string, QueueLink>;
  /** Slots each tenant holds (only tenants holding any), by tenant. */
  readonly held: ReadonlyMap<string, number>;
  /** Calls in flight in each session (only sessions with any), by session ID. */
  readonly sessionCalls: ReadonlyMap<string, number>;
}

/** The index of an empty state. */
export function emptyAdmissionIndex(): AdmissionIndex {
  return { queues: new Map(), links: new Map(), held: new Map(), sessionCalls: new Map() };
}
