/**
 * Resolving a pinned call once: the version (and k and revision) it will be served by. A call of a
 * session that already resolved takes the session's resolution; a retry (`retryOf`) whose retried
 * call resolved takes that call's; any other call takes its tenant's entry in force. So a retry or
 * a session's later call never meets another version, whatever flips came in between.
 */
import type { ClusterState } from '../../../projections/cluster-state.js';
import type { RoutingState } from '../../../projections/routing-state.js';
import type { GrpcCodeName } from '../../../shared/grpc-codes.js';
import { sessionIdOf, type CallToPlace } from '../call.js';
import { foreignSessionMessage } from '../session-owner.js';
import { rulesSteps } from '../rules-version.js';

/**
 * Where a resolution came from: the table, the retried call, the session, or the call's own
 * earlier placement (`placed`: the call placed again after a failed dial).
 */
export type ResolutionSource = 'table' | 'retry' | 'session' | 'placed';

/** A pinned call's resolution: the table entry it was served by. */
export interface Resolution {
  readonly tenantId: string;
  readonly version: string;
  readonly k: number;
  /** The revision of the `RoutingRevised` that set the entry. */
  readonly revision: number;
  readonly source: ResolutionSource;
  /**
   * The retried call (source `retry`), the session (source `session`) or the call itself (source
   * `placed`); null for `table`.
   */
  readonly from: string | null;
}

/** The resolution, or why the call cannot be resolved. */
export type ResolutionOutcome =
  | { readonly ok: true; readonly resolution: Resolution }
  | { readonly ok: false; readonly code: GrpcCodeName; readonly message: string };

/** The entry a revision set, as a resolution (null when it removed the pin or is unknown). */
function atRevision(
  routing: RoutingState,
  revision: number,
  source: ResolutionSource,
  from: string,
): Resolution | null {
  const record = routing.revisions.get(String(revision));
  if (!record || record.version === null) return null;
  return {
    tenantId: record.tenantId,
    version: record.version,
    k: record.k ?? 1,
    revision,
    source,
    from,
  };
}

/** Why a pinned call of a tenant without a pin is refused (FAILED_PRECONDITION). */
export function noPinMessage(tenantId: string): string {
  return `tenant ${tenantId} has no pinned version (an operator pins one with readie pin stage and readie pin flip)`;
}

/**
 * Resolves a pinned call of `tenantId` against `state` (docs/tenant-routing.md). `placedAgain`:
 * the call is placed again after a failed dial, and keeps the resolution of its first placement.
 */
export function resolvePinned(
  state: ClusterState,
  call: CallToPlace,
  tenantId: string,
  placedAgain = false,
): ResolutionOutcome {
  const { routing } = state;
  if (placedAgain) {
    const own = ownResolution(routing, call.requestId, tenantId);
    if (own !== null) return { ok: true, resolution: own };
  }
  const sessionId = sessionIdOf(call.sessionId);
  if (sessionId !== null) {
    const session = routing.sessions.get(sessionId);
    if (session !== undefined) {
      // Session affinity refuses another tenant's session first; should a log still lead here,
      // the answer is the same, naming no owner.
      if (session.tenantId !== tenantId) {
        // Rules before 4 (a log recorded then): the pinned call was refused in other words.
        return rulesSteps(state.rulesVersion).owners
          ? { ok: false, code: 'NOT_FOUND', message: foreignSessionMessage(sessionId) }
          : {
              ok: false,
              code: 'PERMISSION_DENIED',
              message: `session ${sessionId} belongs to another tenant; start a new session`,
            };
      }
      const resolution = atRevision(routing, session.revision, 'session', sessionId);
      if (resolution !== null) return { ok: true, resolution };
    }
  }
  const retryOf = call.retryOf ?? null;
  if (retryOf !== null && retryOf !== '') {
    const retried = routing.calls.get(retryOf);
    if (retried !== undefined && retried.revision !== null) {
      const resolution = atRevision(routing, retried.revision, 'retry', retryOf);
      if (resolution !== null && resolution.tenantId === tenantId) return { ok: true, resolution };
    }
  }
  const queued = call.queuedRevision ?? null;
  if (queued !== null) {
    // Admitted from the queue: the entry it was queued under, whatever flipped meanwhile.
    const kept = atRevision(routing, queued, 'table', tenantId);
    if (kept !== null && kept.tenantId === tenantId) {
      return { ok: true, resolution: { ...kept, from: null } };
    }
  }
  const entry = routing.entries.get(tenantId);
  if (entry === undefined) {
    return {
      ok: false,
      code: 'FAILED_PRECONDITION',
      message: noPinMessage(tenantId),
    };
  }
  return {
    ok: true,
    resolution: {
      tenantId,
      version: entry.version,
      k: entry.k,
      revision: entry.revision,
      source: 'table',
      from: null,
    },
  };
}

/**
 * The resolution a call of `tenantId` already has (its `CallPlaced` or `CallRejected` logged one):
 * what its next placement after a failed dial keeps, and what a refusal then names. Null: none.
 */
export function ownResolution(
  routing: RoutingState,
  requestId: string,
  tenantId: string | null,
): Resolution | null {
  const own = routing.calls.get(requestId);
  if (own === undefined || own.revision === null || own.tenantId !== tenantId) return null;
  return atRevision(routing, own.revision, 'placed', requestId);
}
