/** A call as placement sees it, and the budget it asks for once defaults are applied. */
import type { Demand, EventOf } from '../../events/types.js';
import { isGpuCall, memoryBudget } from '../../shared/call-budget.js';
import type { Config } from '../../shared/config.js';

/** A call that reached placement: its IDs and its demand exactly as the client sent it. */
export interface CallToPlace {
  readonly requestId: string;
  /** The session, or null (an empty string counts as no session). */
  readonly sessionId: string | null;
  readonly demand: Demand;
  /** The tenant the caller's credential names; null (or absent) without one. */
  readonly tenantId?: string | null;
  /** The request ID this call retries; null (or absent) for a first try. */
  readonly retryOf?: string | null;
  /**
   * How long the caller's deadline leaves it as the call is requested, ms (`CallRequested`'s
   * `deadlineMs`); null (or absent): no deadline.
   */
  readonly deadlineMs?: number | null;
  /**
   * The key of the call's image declaration for its tenant (`CallRequested.imageKey`); null (or
   * absent): no image.
   */
  readonly imageKey?: string | null;
  /**
   * For a pinned call admitted from the queue (rules 9): the revision of its tenant's table entry
   * when it was queued, which it keeps; null (or absent): the entry in force.
   */
  readonly queuedRevision?: number | null;
}

/** The call a `CallRequested` asked placement for: the decision's whole input from the log. */
export function callOfRequested(event: EventOf<'CallRequested'>): CallToPlace {
  return {
    requestId: event.requestId,
    sessionId: event.sessionId,
    tenantId: event.tenantId,
    retryOf: event.retryOf,
    demand: event.demand,
    deadlineMs: event.deadlineMs,
    imageKey: event.imageKey,
  };
}

/** What a call needs from a worker, with defaults applied. */
export interface Budget {
  /** Memory in bytes: the call's own, or `DEFAULT_MEMORY` when it named none. */
  readonly memory: number;
  /** GPU memory in bytes (0 when none). */
  readonly gpuMemory: number;
  /** A GPU call: it says so, or it has a GPU memory budget. */
  readonly gpuCall: boolean;
}

/** The budget of a demand under a config. */
export function budgetOf(demand: Demand, config: Config): Budget {
  return {
    memory: memoryBudget(demand.memory, config.DEFAULT_MEMORY),
    gpuMemory: demand.gpuMemory ?? 0,
    gpuCall: isGpuCall(demand.gpu, demand.gpuMemory),
  };
}

/**
 * A session ID as the router reads it: the wire's empty string, like null, is no session. The one
 * definition, for the client's config and for a call placement sees.
 */
export function sessionIdOf(sessionId: string | null): string | null {
  return sessionId === null || sessionId === '' ? null : sessionId;
}
