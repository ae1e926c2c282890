/** The call history's records as the wire shows them (`readie.v1.CallView`, history.proto). */
import type { CallRecord, HistoryWindowView } from '../../projections/call-history.js';
import type { CallQuery } from '../../projections/call-history.js';
import type { CallFilter, CallView, HistoryWindow } from '../../proto/gen/readie/v1/history.js';
import { HistoryQueryError } from './history-errors.js';

/** How many calls a list answers when the filter names no limit, and at most. */
export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;

/** One record as a `CallView`. */
export function callView(record: CallRecord): CallView {
  const last = record.attempts.at(-1);
  return {
    requestId: record.requestId,
    tenantId: record.tenantId ?? '',
    function: record.function ?? '',
    sessionId: record.sessionId ?? '',
    retryOf: record.retryOf ?? '',
    state: record.state,
    memory: record.memory ?? undefined,
    gpu: record.gpu,
    requestedAt: record.requestedAt,
    queuedAt: record.queuedAt ?? '',
    admittedAt: record.admittedAt ?? '',
    placedAt: last?.placedAt ?? '',
    boundAt: record.boundAt ?? '',
    finishedAt: record.finishedAt ?? '',
    durationMs: record.durationMs ?? undefined,
    code: record.code ?? '',
    message: record.message ?? '',
    workerId: last?.workerId ?? '',
    containerId: record.boundContainerId ?? last?.containerId ?? '',
    checkpointId: record.boundCheckpointId ?? last?.checkpointId ?? '',
    version: last?.version ?? '',
    routingRevision: last?.routingRevision ?? 0,
    attempts: record.attempts.map((attempt) => ({
      workerId: attempt.workerId,
      containerId: attempt.containerId ?? '',
      checkpointId: attempt.checkpointId ?? '',
      version: attempt.version ?? '',
      routingRevision: attempt.routingRevision ?? 0,
      coldLoad: attempt.coldLoad,
      placedAt: attempt.placedAt,
      dialError: attempt.dialError ?? '',
      dialFailedAt: attempt.dialFailedAt ?? '',
    })),
    requestedSeq: record.requestedSeq,
    retryAfterMs: record.retryAfterMs ?? undefined,
  };
}

/** The history's window as the wire shows it. */
export function historyWindowView(window: HistoryWindowView): HistoryWindow {
  return {
    calls: window.calls,
    maxCalls: window.maxCalls,
    retentionMs: window.retentionMs,
    oldestRequestedAt: window.oldestRequestedAt ?? '',
    approxBytes: window.approxBytes,
  };
}

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
