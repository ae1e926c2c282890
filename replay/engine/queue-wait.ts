/**
 * A call's wait in the admission queue as `replay explain` tells it: when it was queued and why,
 * when it was admitted (or left, and why), and every call admitted before it meanwhile with the
 * reason the fair order gave that call its turn first (docs/placement.md, "The admission
 * queue"): its tenant's share (slots held / weight) against this call's tenant's, at that
 * admission. Folds its own working copy of the state, so it sees each admission against the state
 * just before it, as admission decided it.
 */
import { queueTenant, slotCapReached, slotsHeldBy } from '../../src/core/admission/index.js';
import type { ClusterEvent } from '../../src/events/types.js';
import {
  applyInPlace,
  initialState,
  quotaOf,
  type ClusterState,
} from '../../src/projections/index.js';

/** The most admissions before the call a wait lists (the rest are counted). */
export const ADMISSIONS_LISTED = 20;

/** A call admitted while the explained call waited, and why it went first. */
export interface AdmittedBefore {
  readonly seq: number;
  readonly at: string;
  readonly requestId: string;
  /** Its tenant (`` for calls without one). */
  readonly tenantId: string;
  /** Slots its tenant held just before its admission (its share: weight 1 until quotas). */
  readonly held: number;
  /** Slots the explained call's tenant held then. */
  readonly ownHeld: number;
  /** Why it went first, in the fair order's words. */
  readonly why: string;
}

/** A call of another tenant, queued before the explained call, that it was admitted ahead of. */
export interface AdmittedAhead {
  /** The seq of its `CallQueued`. */
  readonly queuedSeq: number;
  readonly requestId: string;
  readonly tenantId: string;
  /** Slots its tenant held at the explained call's admission. */
  readonly held: number;
  /** Slots the explained call's tenant held then. */
  readonly ownHeld: number;
  /** Why the explained call went first, naming both tenants' slots held. */
  readonly why: string;
}

/** The explained call's wait. */
export interface QueueWait {
  readonly queuedSeq: number;
  readonly queuedAt: string;
  /** Why it did not fit when it was queued (placement's words, as recorded). */
  readonly why: string;
  /** Its admission; null when it left the queue unadmitted (or the log ends first). */
  readonly admitted: { readonly seq: number; readonly at: string } | null;
  /** How it left unadmitted; null when admitted or still waiting at the log's end. */
  readonly left: {
    readonly seq: number;
    readonly at: string;
    readonly reason: string;
    readonly code: string;
  } | null;
  /** The calls admitted before it while it waited, the first `ADMISSIONS_LISTED`. */
  readonly before: readonly AdmittedBefore[];
  /** How many calls were admitted before it in all. */
  readonly admittedBefore: number;
  /**
   * Calls of other tenants queued before it and still waiting when it was admitted (the first
   * `ADMISSIONS_LISTED`), each with why it went first.
   */
  readonly ahead: readonly AdmittedAhead[];
  /** How many such calls there were in all. */
  readonly admittedAhead: number;
}

/** Why `other` (of `tenant`, holding `held`) was admitted before a call of `own` holding `ownHeld`. */
function reasonOf(tenant: string, held: number, own: string, ownHeld: number): string {
  if (tenant === own) return 'same tenant, queued earlier (first come, first served)';
  if (held < ownHeld) return `its tenant held fewer slots (${held} < ${ownHeld})`;
  if (held === ownHeld) {
    return `tie at ${held} slots held, its tenant ID first`;
  }
  return `this call's tenant came first (${ownHeld} < ${held} slots held) but this call did not fit then`;
}

/** A tenant as the screens name it. */
function tenantName(tenant: string): string {
  return tenant === '' ? '(no tenant)' : tenant;
}

/** Slots held, with the weight when a quota gives one other than 1: `2` or `2 / weight 3`. */
function shareText(state: ClusterState, tenant: string, held: number): string {
  const { weight } = quotaOf(state.quotas, tenant);
  return weight === 1 ? String(held) : `${held} / weight ${weight}`;
}

/**
 * Why a call of `own` was admitted ahead of `other`'s earlier call, against the state just
 * before its admission: the fair order's words, with both tenants' slots held.
 */
function reasonAhead(state: ClusterState, own: string, other: string): string {
  const ownHeld = slotsHeldBy(state, own);
  const otherHeld = slotsHeldBy(state, other);
  const ownShare = ownHeld / quotaOf(state.quotas, own).weight;
  const otherShare = otherHeld / quotaOf(state.quotas, other).weight;
  const both = `${tenantName(own)} ${shareText(state, own, ownHeld)}, ${tenantName(other)} ${shareText(state, other, otherHeld)}`;
  const capped = slotCapReached(state, other);
  if (capped !== null) return `the other tenant was at its slot cap: ${capped}`;
  if (ownShare < otherShare) return `its tenant held fewer slots (${both})`;
  if (ownShare === otherShare) return `tie (${both}), its tenant ID first`;
  return `the other tenant's call did not fit then, though its tenant held fewer slots (${both})`;
}

/** Watches a log, event by event, for one call's wait in the admission queue. */
export class QueueWaitTracker {
  private state: ClusterState = initialState();
  private wait:
    | (Omit<QueueWait, 'before' | 'admittedBefore' | 'admitted' | 'left'> & {
        admitted: QueueWait['admitted'];
        left: QueueWait['left'];
        before: AdmittedBefore[];
        admittedBefore: number;
        ahead: AdmittedAhead[];
        admittedAhead: number;
        tenant: string;
      })
    | null = null;
  private done = false;
  private requestId = '';

  /** `isCall` tells the explained call's request ID. */
  constructor(private readonly isCall: (requestId: string) => boolean) {}

  /** Takes the next event of the log in. */
  observe(event: ClusterEvent): void {
    if (!this.done) this.note(event);
    this.state = applyInPlace(this.state, event);
  }

  private note(event: ClusterEvent): void {
    if (event.type === 'CallQueued' && this.wait === null && this.isCall(event.requestId)) {
      this.requestId = event.requestId;
      this.wait = {
        queuedSeq: event.seq,
        queuedAt: event.at,
        why: event.why,
        admitted: null,
        left: null,
        before: [],
        admittedBefore: 0,
        ahead: [],
        admittedAhead: 0,
        tenant: queueTenant(event.tenantId),
      };
      return;
    }
    const { wait, requestId } = this;
    if (wait === null) return;
    if (event.type === 'CallLeftQueue' && event.requestId === requestId) {
      wait.left = { seq: event.seq, at: event.at, reason: event.reason, code: event.code };
      this.done = true;
      return;
    }
    if (event.type !== 'CallAdmitted') return;
    if (event.requestId === requestId) {
      wait.admitted = { seq: event.seq, at: event.at };
      this.noteAhead(wait);
      this.done = true;
      return;
    }
    const queued = this.state.queue.get(event.requestId);
    if (queued === undefined) return;
    wait.admittedBefore += 1;
    if (wait.before.length >= ADMISSIONS_LISTED) return;
    const tenantId = queueTenant(queued.tenantId);
    const other = slotsHeldBy(this.state, tenantId);
    const own = slotsHeldBy(this.state, wait.tenant);
    wait.before.push({
      seq: event.seq,
      at: event.at,
      requestId: event.requestId,
      tenantId,
      held: other,
      ownHeld: own,
      why: reasonOf(tenantId, other, wait.tenant, own),
    });
  }

  /** At the call's admission: the earlier calls of other tenants it went ahead of, and why. */
  private noteAhead(wait: {
    queuedSeq: number;
    tenant: string;
    ahead: AdmittedAhead[];
    admittedAhead: number;
  }): void {
    for (const queued of this.state.queue.values()) {
      const tenantId = queueTenant(queued.tenantId);
      if (queued.seq >= wait.queuedSeq || tenantId === wait.tenant) continue;
      wait.admittedAhead += 1;
      if (wait.ahead.length >= ADMISSIONS_LISTED) continue;
      wait.ahead.push({
        queuedSeq: queued.seq,
        requestId: queued.requestId,
        tenantId,
        held: slotsHeldBy(this.state, tenantId),
        ownHeld: slotsHeldBy(this.state, wait.tenant),
        why: reasonAhead(this.state, wait.tenant, tenantId),
      });
    }
  }

  /** The call's wait; null when it was never queued. */
  result(): QueueWait | null {
    if (this.wait === null) return null;
    const { tenant: _tenant, ...wait } = this.wait;
    return wait;
  }
}
