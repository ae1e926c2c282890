/** The call history's refusals: each a `StatusError` with its gRPC code and words to act on. */
import { StatusError } from '../../shared/status-error.js';
import { formatDuration } from '../../shared/units.js';
import type { HistoryWindowView } from '../../projections/call-history.js';

/**
 * A request ID the history does not hold (or, for a tenant, holds as another tenant's call: the
 * same words, so an ID's existence never leaks). Names where the history looked.
 */
export class CallNotInHistoryError extends StatusError {
  override readonly name = 'CallNotInHistoryError';
  readonly code = 'NOT_FOUND';

  constructor(requestId: string, window: HistoryWindowView, forTenant: boolean) {
    const bounds = `the last ${formatDuration(window.retentionMs)}, at most ${window.maxCalls} calls (HISTORY_RETENTION, HISTORY_MAX_CALLS)`;
    super(
      forTenant
        ? `no call ${requestId} of yours in the router's call history (it keeps ${bounds})`
        : `no call ${requestId} in the router's call history: it holds ${window.calls} calls` +
            `${window.oldestRequestedAt === null ? '' : ` requested since ${window.oldestRequestedAt}`}, ` +
            `and keeps ${bounds}`,
    );
  }
}

/** A call whose output cannot be had, and why (never ran, its worker gone, aged out). */
export class CallOutputGoneError extends StatusError {
  override readonly name = 'CallOutputGoneError';
  readonly code = 'NOT_FOUND';
}

/** The worker that keeps a call's output could not be reached now. */
export class CallOutputUnreachableError extends StatusError {
  override readonly name = 'CallOutputUnreachableError';
  readonly code = 'UNAVAILABLE';
}

/** A malformed history query (a bad filter, no request ID). */
export class HistoryQueryError extends StatusError {
  override readonly name = 'HistoryQueryError';
  readonly code = 'INVALID_ARGUMENT';
}
