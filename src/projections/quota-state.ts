/**
 * Tenants' quotas (docs/quotas.md): a revisioned table folded from `QuotaChanged` and
 * `QuotaRemoved`, and each tenant's quota in force (the defaults for a tenant the table does not
 * name, and for calls without a tenant).
 */
import type { EventOf } from '../events/types.js';

/** The calls one tenant may have waiting in the admission queue unless its quota says otherwise. */
export const DEFAULT_MAX_QUEUED = 2_000;
/** A tenant's weight in the fair order unless its quota says otherwise. */
export const DEFAULT_WEIGHT = 1;

/** One tenant's quota. */
export interface Quota {
  /** Its weight in the fair order: slots held / weight is its share (above 0). */
  readonly weight: number;
  /** The most slots it may hold, sessions' idle containers included; null: no cap. */
  readonly maxSlots: number | null;
  /** The most calls it may have waiting in the admission queue. */
  readonly maxQueued: number;
}

/** A tenant's entry of the table: its quota and the revision that set it. */
export interface QuotaEntry extends Quota {
  readonly revision: number;
}

/** The quota table. */
export interface QuotaTable {
  /** The revision of the last `QuotaChanged` or `QuotaRemoved` (0 before any). */
  readonly revision: number;
  /** The tenants' entries, by tenant ID. */
  readonly entries: ReadonlyMap<string, QuotaEntry>;
}

/** The quota of a tenant the table does not name. */
export const DEFAULT_QUOTA: Quota = {
  weight: DEFAULT_WEIGHT,
  maxSlots: null,
  maxQueued: DEFAULT_MAX_QUEUED,
};

/** The table before any quota event. */
export function initialQuotas(): QuotaTable {
  return { revision: 0, entries: new Map() };
}

/** The quota in force for `tenantId` (`` or null: calls without a tenant get the defaults). */
export function quotaOf(table: QuotaTable, tenantId: string | null | undefined): Quota {
  if (tenantId === null || tenantId === undefined || tenantId === '') return DEFAULT_QUOTA;
  return table.entries.get(tenantId) ?? DEFAULT_QUOTA;
}

/** A mutable view of the table, as the fold changes it. */
interface MutableQuotas {
  revision: number;
  entries: Map<string, QuotaEntry>;
}

/** Applies a quota event to the table (the fold's part for quotas). */
export function applyQuotaEvent(
  table: MutableQuotas,
  event: EventOf<'QuotaChanged'> | EventOf<'QuotaRemoved'>,
): void {
  table.revision = event.revision;
  if (event.type === 'QuotaRemoved') {
    table.entries.delete(event.tenantId);
    return;
  }
  table.entries.set(event.tenantId, {
    weight: event.weight,
    maxSlots: event.maxSlots,
    maxQueued: event.maxQueued,
    revision: event.revision,
  });
}
