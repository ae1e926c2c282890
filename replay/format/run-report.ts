/** The readable report of `replay run`: a table of calls and a summary line. */
import type { CallResult } from '../engine/call-result.js';
import { cell, table } from './table.js';

/** Counts of a replay, for the summary line. */
export interface RunSummary {
  calls: number;
  placed: number;
  rejected: number;
  match: number;
  diverged: number;
  none: number;
}

/** An empty summary. */
export function emptySummary(): RunSummary {
  return { calls: 0, placed: 0, rejected: 0, match: 0, diverged: 0, none: 0 };
}

/** Counts one call into the summary. */
export function countCall(summary: RunSummary, result: CallResult): void {
  summary.calls += 1;
  summary[result.decision.outcome] += 1;
  summary[result.recorded] += 1;
}

/** One table row of a call. */
export function callRow(result: CallResult): string[] {
  const { decision } = result;
  const placed = decision.outcome === 'placed' ? decision : null;
  return [
    String(result.seq),
    result.at,
    result.requestId,
    cell(result.tenantId),
    cell(result.sessionId),
    decision.outcome,
    cell(placed?.workerId),
    cell(placed?.containerId),
    cell(placed?.checkpointId),
    decision.version === null
      ? '-'
      : `${decision.version}@${decision.routingRevision ?? '-'}${placed?.coldLoad ? ' cold load' : ''}${decision.outcome === 'rejected' && decision.retryAfterMs !== null ? ` retry ${decision.retryAfterMs}ms` : ''}`,
    decision.outcome === 'rejected'
      ? `${decision.code}: ${decision.message}`
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

/** "12 calls: 10 placed, 2 rejected; recorded: 9 match, 0 diverged, 3 none". */
export function summaryLine(summary: RunSummary): string {
  return `${summary.calls} call${summary.calls === 1 ? '' : 's'}: ${summary.placed} placed, ${summary.rejected} rejected; recorded: ${summary.match} match, ${summary.diverged} diverged, ${summary.none} none`;
}
