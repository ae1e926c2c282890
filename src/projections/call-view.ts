/**
 * The call history's records as plain data in the wire's shape (`readie.v1.CallView` and
 * `HistoryWindow` of history.proto: the same field names, `''` for an absent text, `undefined`
 * for an absent optional number), so the router answers with them and replay's report draws the
 * same page from a log.
 */
import type { CallAttempt, CallRecord, HistoryWindowView } from './call-history.js';

/** One placement as the wire shows it (`readie.v1.CallAttemptView`). */
export interface CallAttemptData {
  workerId: string;
  containerId: string;
  checkpointId: string;
  version: string;
  routingRevision: number;
  coldLoad: boolean;
  placedAt: string;
  dialError: string;
  dialFailedAt: string;
}

/** A call as the wire shows it (`readie.v1.CallView`). */
export interface CallViewData {
  requestId: string;
  tenantId: string;
  function: string;
  sessionId: string;
  retryOf: string;
  state: string;
  memory?: number | undefined;
  gpu: boolean;
  requestedAt: string;
  queuedAt: string;
  admittedAt: string;
  placedAt: string;
  boundAt: string;
  finishedAt: string;
  durationMs?: number | undefined;
  code: string;
  message: string;
  workerId: string;
  containerId: string;
  checkpointId: string;
  version: string;
  routingRevision: number;
  attempts: CallAttemptData[];
  requestedSeq: number;
  retryAfterMs?: number | undefined;
  turnWaitMs?: number | undefined;
  raisedType: string;
  raisedMessage: string;
  queuedWhy: string;
  queueWaitMs?: number | undefined;
  inputs?: number | undefined;
  inputsRaised?: number | undefined;
}

/** The history's window as the wire shows it (`readie.v1.HistoryWindow`). */
export interface HistoryWindowData {
  calls: number;
  maxCalls: number;
  retentionMs: number;
  oldestRequestedAt: string;
  approxBytes: number;
}

/** One record as a `CallView`. */
export function callView(record: CallRecord): CallViewData {
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
    attempts: record.attempts.map((attempt: CallAttempt) => ({
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
    turnWaitMs: record.turnWaitMs ?? undefined,
    raisedType: record.raised?.type ?? '',
    raisedMessage: record.raised?.message ?? '',
    queuedWhy: record.queuedWhy ?? '',
    queueWaitMs: record.queueWaitMs ?? undefined,
    inputs: record.inputs ?? undefined,
    inputsRaised: record.inputsRaised ?? undefined,
  };
}

/** The history's window as the wire shows it. */
export function historyWindowView(window: HistoryWindowView): HistoryWindowData {
  return {
    calls: window.calls,
    maxCalls: window.maxCalls,
    retentionMs: window.retentionMs,
    oldestRequestedAt: window.oldestRequestedAt ?? '',
    approxBytes: window.approxBytes,
  };
}
