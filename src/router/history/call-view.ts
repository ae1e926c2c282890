/** Wire filters as history queries (the views themselves: src/projections/call-view.ts). */
import type { CallQuery } from '../../projections/call-history.js';
import type { CallFilter } from '../../proto/gen/readie/v1/history.js';
import { HistoryQueryError } from './history-errors.js';

export { callView, historyWindowView } from '../../projections/call-view.js';

/** How many calls a list answers when the filter names no limit, and at most. */
export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;

/** A wire filter as a history query, as of `nowMs`; `tenantId` undefined: every tenant's. */
export function queryOf(
  filter: CallFilter | undefined,
  nowMs: number,
  tenantId: string | null | undefined,
): CallQuery {
  const limit = filter?.limit ?? 0;
  if (limit > MAX_LIST_LIMIT) {
    throw new HistoryQueryError(
      `limit ${limit} is more than ${MAX_LIST_LIMIT} calls a list answers`,
    );
  }
  const sinceMs = filter?.sinceMs ?? 0;
  return {
    ...(tenantId === undefined ? {} : { tenantId }),
    ...(sinceMs > 0 ? { sinceMs: nowMs - sinceMs } : {}),
    ...(filter?.failed ? { failed: true } : {}),
    ...(filter?.function ? { function: filter.function } : {}),
    limit: limit === 0 ? DEFAULT_LIST_LIMIT : limit,
  };
}
