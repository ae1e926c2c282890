/** The readable report of `replay run`: a table of calls and a summary line. */
import { outcomeOf, type CallResult } from '../engine/call-result.js';
import { cell, table } from './table.js';

/** Counts of a replay, for the summary line. */
export interface RunSummary {
  calls: number;
  placed: number;
  /** Calls that wait in the admission queue at their decision (each admission is a later call). */
  queued: number;
  rejected: number;
  match: number;
  diverged: number;
  none: number;
}

/** An empty summary. */
export function emptySummary(): RunSummary {
  return { calls: 0, placed: 0, queued: 0, rejected: 0, match: 0, diverged: 0, none: 0 };
}

/** Counts one call into the summary. */
export function countCall(summary: RunSummary, result: CallResult): void {
  summary.calls += 1;
  summary[outcomeOf(result)] += 1;
  summary[result.recorded] += 1;
}

/** One table row of a call. */
export function callRow(result: CallResult): string[] {
  const { decision } = result;
  const outcome = outcomeOf(result);
  // A queued call's placement (a worker its tenant's cap kept it from) is not where it runs.
  const placed = decision.outcome === 'placed' && outcome === 'placed' ? decision : null;
  return [
    String(result.seq),
    result.at,
    result.requestId,
    cell(result.tenantId),
    cell(result.sessionId),
    outcome,
    cell(placed?.workerId),
    cell(placed?.containerId),
    cell(placed?.checkpointId),
    decision.version === null
      ? '-'
      : `${decision.version}@${decision.routingRevision ?? '-'}${placed?.coldLoad ? ' cold load' : ''}${outcome === 'rejected' && decision.outcome === 'rejected' && decision.retryAfterMs !== null ? ` retry ${decision.retryAfterMs}ms` : ''}`,
    outcome === 'queued'
      ? cell(result.queued)
      : decision.outcome === 'rejected'
        ? `${decision.code}: ${cell(decision.message)}`
        : cell(placed?.packages),
    result.recorded,
  ];
}

/** The table of calls. */
export function callTable(rows: readonly string[][]): string {
  return table(
    [
      'SEQ',
      'TIME',
      'REQUEST',
      'TENANT',
      'SESSION',
      'OUTCOME',
      'WORKER',
      'CONTAINER',
      'CHECKPOINT',
      'VERSION@REV',
      'PACKAGES / REASON',
      'RECORDED',
    ],
    rows,
  );
}

/**
 * "12 calls: 10 placed, 2 rejected; recorded: 9 match, 0 diverged, 3 none" ("..., 3 queued, ..."
 * when any call waited in the admission queue).
 */
export function summaryLine(summary: RunSummary): string {
  const queued = summary.queued > 0 ? `${summary.queued} queued, ` : '';
  return `${summary.calls} call${summary.calls === 1 ? '' : 's'}: ${summary.placed} placed, ${queued}${summary.rejected} rejected; recorded: ${summary.match} match, ${summary.diverged} diverged, ${summary.none} none`;
}
