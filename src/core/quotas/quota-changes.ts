/**
 * An operator's quota changes as decisions (docs/quotas.md): set and remove. Each checks its input
 * against the state and returns the events to append (`QuotaChanged` or `QuotaRemoved`, caused by
 * `admin:TENANT`) with a summary for the operator, or throws a `QuotaChangeRefusedError` with its
 * own code and message, having appended nothing. A set names the fields it changes; the others
 * keep their value (or their default), and the event records the whole quota in force after it.
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { quotaOf, type Quota } from '../../projections/quota-state.js';
import type { Decision } from '../decision.js';
import { tenantIdProblem } from '../tenant-id.js';
import { slotsHeldBy } from '../admission/fair-order.js';
import { queuedCount } from '../admission/queue-rules.js';
import { QuotaChangeRefusedError } from './quota-errors.js';

/** The largest weight a quota may give (a ratio of a million to one is already no share at all). */
export const MAX_WEIGHT = 1_000_000;
/** The largest slot cap or queue cap a quota may give. */
export const MAX_QUOTA_CAP = 1_000_000;

/** What a quota change did, for the operator. */
export interface QuotaChangeSummary {
  /** The quota table's revision in force after the change. */
  readonly revision: number;
  readonly tenantId: string;
  /** The quota in force after the change (the defaults after a removal). */
  readonly quota: Quota;
  /** Whether the table names the tenant after the change (false after a removal). */
  readonly set: boolean;
  /** The quota in force before it. */
  readonly previous: Quota;
  readonly notes: readonly string[];
}

/** A quota change's decision: its events and its summary. */
export interface QuotaChangeDecision extends Decision {
  readonly change: QuotaChangeSummary;
}

/** `readie quota set`: the fields to change (null: keep), refused unless `expectRevision` is current. */
export interface QuotaSetInput {
  readonly tenantId: string;
  /** Above 0; null: keep. */
  readonly weight: number | null;
  /** A whole number >= 1; null: keep; `none`: no cap. */
  readonly maxSlots: number | 'none' | null;
  /** A whole number >= 1; null: keep. */
  readonly maxQueued: number | null;
  readonly expectRevision: number | null;
}

/** `readie quota remove`: back to the defaults. */
export interface QuotaRemoveInput {
  readonly tenantId: string;
  readonly expectRevision: number | null;
}

function refuse(
  code: ConstructorParameters<typeof QuotaChangeRefusedError>[0],
  message: string,
): never {
  throw new QuotaChangeRefusedError(code, message);
}

function checkTenant(tenantId: string): void {
  const problem = tenantIdProblem(tenantId, 'quota');
  if (problem !== null) refuse('INVALID_ARGUMENT', problem);
}

/**
 * Why `weight` is not a valid weight (a number above 0 and at most `MAX_WEIGHT`), or null when it
 * is: the one rule for a quota's weight, for the router and for `replay whatif --quota`.
 */
export function weightProblem(weight: number): string | null {
  if (Number.isFinite(weight) && weight > 0 && weight <= MAX_WEIGHT) return null;
  return `weight must be a number above 0 and at most ${MAX_WEIGHT} (got ${String(weight)})`;
}

/**
 * Why `value` is not a valid `maxSlots` or `maxQueued` (a whole number, at least 1 and at most
 * `MAX_QUOTA_CAP`), or null when it is.
 */
export function capProblem(field: 'maxSlots' | 'maxQueued', value: number): string | null {
  if (Number.isInteger(value) && value >= 1 && value <= MAX_QUOTA_CAP) return null;
  return `${field} must be a whole number, at least 1 and at most ${MAX_QUOTA_CAP} (got ${String(value)})`;
}

function checkWeight(weight: number): void {
  const problem = weightProblem(weight);
  if (problem !== null) refuse('INVALID_ARGUMENT', problem);
}

function checkCap(field: 'maxSlots' | 'maxQueued', value: number): void {
  const problem = capProblem(field, value);
  if (problem !== null) refuse('INVALID_ARGUMENT', problem);
}

function checkRevision(state: ClusterState, expected: number | null): void {
  const { revision } = state.quotas;
  if (expected !== null && expected !== revision) {
    refuse(
      'FAILED_PRECONDITION',
      `the quota table is at revision ${revision}, not ${expected}: someone changed it since; look again with readie quota status`,
    );
  }
}

function sameQuota(a: Quota, b: Quota): boolean {
  return a.weight === b.weight && a.maxSlots === b.maxSlots && a.maxQueued === b.maxQueued;
}

/** What the new quota means for what the tenant holds and has queued now. */
function effectNotes(state: ClusterState, tenantId: string, quota: Quota, notes: string[]): void {
  const held = slotsHeldBy(state, tenantId);
  if (quota.maxSlots !== null && held >= quota.maxSlots) {
    notes.push(
      `tenant ${tenantId} holds ${held} slot${held === 1 ? '' : 's'} now, maxSlots ${quota.maxSlots}: ` +
        'its calls that need a new slot wait until it holds fewer (nothing it holds is taken from it)',
    );
  }
  const queued = queuedCount(state, tenantId);
  if (queued >= quota.maxQueued) {
    notes.push(
      `${queued} call${queued === 1 ? '' : 's'} of tenant ${tenantId} wait now, maxQueued ${quota.maxQueued}: ` +
        'they keep their places; new ones are refused until fewer wait',
    );
  }
}

/** `readie quota set`: `QuotaChanged` with the whole quota in force after it. */
export function decideQuotaSet(state: ClusterState, input: QuotaSetInput): QuotaChangeDecision {
  const { tenantId } = input;
  checkTenant(tenantId);
  if (input.weight === null && input.maxSlots === null && input.maxQueued === null) {
    refuse('INVALID_ARGUMENT', 'a quota change names at least one of weight, maxSlots, maxQueued');
  }
  if (input.weight !== null) checkWeight(input.weight);
  if (input.maxSlots !== null && input.maxSlots !== 'none') checkCap('maxSlots', input.maxSlots);
  if (input.maxQueued !== null) checkCap('maxQueued', input.maxQueued);
  checkRevision(state, input.expectRevision);
  const previous = quotaOf(state.quotas, tenantId);
  const named = state.quotas.entries.has(tenantId);
  const quota: Quota = {
    weight: input.weight ?? previous.weight,
    maxSlots:
      input.maxSlots === 'none'
        ? null
        : input.maxSlots === null
          ? previous.maxSlots
          : input.maxSlots,
    maxQueued: input.maxQueued ?? previous.maxQueued,
  };
  const notes: string[] = [];
  const cause = { kind: 'admin', tenantId } as const;
  if (named && sameQuota(quota, previous)) {
    notes.push('the quota is already this: nothing changed');
    return {
      cause,
      events: [],
      change: { revision: state.quotas.revision, tenantId, quota, set: true, previous, notes },
    };
  }
  effectNotes(state, tenantId, quota, notes);
  const revision = state.quotas.revision + 1;
  const event: NewEvent = { type: 'QuotaChanged', revision, tenantId, ...quota };
  return {
    cause,
    events: [event],
    change: { revision, tenantId, quota, set: true, previous, notes },
  };
}

/** `readie quota remove`: `QuotaRemoved`; the tenant gets the defaults from here on. */
export function decideQuotaRemove(
  state: ClusterState,
  input: QuotaRemoveInput,
): QuotaChangeDecision {
  const { tenantId } = input;
  checkTenant(tenantId);
  const entry = state.quotas.entries.get(tenantId);
  if (entry === undefined) {
    refuse('NOT_FOUND', `tenant ${tenantId} has no quota: it already has the defaults`);
  }
  checkRevision(state, input.expectRevision);
  const previous = quotaOf(state.quotas, tenantId);
  const quota = quotaOf(state.quotas, null);
  const revision = state.quotas.revision + 1;
  const notes: string[] = [];
  effectNotes(state, tenantId, quota, notes);
  return {
    cause: { kind: 'admin', tenantId },
    events: [{ type: 'QuotaRemoved', revision, tenantId }],
    change: { revision, tenantId, quota, set: false, previous, notes },
  };
}
