/**
 * A session is its owner's (the tenant of its first placed call), and the words every refusal of
 * a session the caller may not use says: the same for another tenant's session whatever its
 * state, so an ID's existence, liveness or expiry does not leak; and the words of an expired one.
 */
import type { SessionExpiryReason } from '../../events/schema.js';
import type { SessionRecord } from '../../projections/cluster-state.js';

/**
 * The refusal of a call naming a session it may not use: the same words for every such session
 * (live, busy, expired or ended), naming nothing but the ID the caller sent.
 */
export function foreignSessionMessage(sessionId: string): string {
  return `session not found: this caller has no session ${sessionId}; start a new session (a new session ID)`;
}

/** Whether a caller of `tenantId` owns `session` (null owns the sessions of untenanted calls). */
export function ownsSession(session: SessionRecord, tenantId: string | null | undefined): boolean {
  return session.tenantId === (tenantId ?? null);
}

/** The refusal of a call of an expired session, in the words every refusal of it uses. */
export function sessionExpiredMessage(
  sessionId: string,
  expiredAtSeq: number,
  reason: SessionExpiryReason,
): string {
  return `session expired: session ${sessionId} ended at seq ${expiredAtSeq} (${reason})`;
}
