/** The screen `replay explain` prints for a session call refused "session is busy". */
import { printableData } from '../../src/shared/printable.js';
import type { RefusedTurn } from '../commands/explain-turn.js';
import { lifecycleSection } from './explain-screen.js';
import { table } from './table.js';

/** The explanation of a call refused before placement because its session was busy. */
export function turnScreen(explained: RefusedTurn): string {
  const { refusal, waitTimeoutMs, running, check, lifecycle } = printableData(explained);
  const lines = [
    `Request ${refusal.requestId} in session ${refusal.sessionId}, seq ${refusal.seq}, ${refusal.at}` +
      `${refusal.tenantId ? `, tenant ${refusal.tenantId}` : ''}`,
    `Refused before placement: RESOURCE_EXHAUSTED "session is busy". It waited ${refusal.waitedMs} ms for its ` +
      `session's turn (SESSION_WAIT_TIMEOUT ${waitTimeoutMs} ms), with ${refusal.ahead} other call(s) of the session waiting ahead of it; ` +
      'calls of one session run one at a time, so it was never requested and placement never saw it.',
    check === undefined
      ? 'Decision now: not made again (the log records no cause for it)'
      : check.recorded === 'match'
        ? 'Decision now: refused the same way (recorded: match)'
        : `Decision now: otherwise (recorded: diverged; ${check.divergence ?? ''})`,
    '',
    ...(lifecycle ? [...lifecycleSection(lifecycle), ''] : []),
    running.length === 0
      ? 'Calls of the session in flight at the refusal: none the log holds (the one ahead may have been placed before the log begins)'
      : 'Calls of the session in flight at the refusal:',
  ];
  if (running.length > 0) {
    lines.push(
      table(
        ['REQUEST', 'WORKER', 'CONTAINER', 'SINCE'],
        running.map((r) => [r.requestId, r.workerId, r.containerId ?? '(new)', r.since]),
      ),
    );
  }
  return `${lines.join('\n')}\n`;
}
