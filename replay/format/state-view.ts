/** The readable view of `replay state`. */
import type { ClusterState } from '../../src/projections/index.js';
import { memoryCommitted, workersById } from '../../src/projections/index.js';
import { compareText } from '../../src/projections/queries.js';
import { formatSize } from '../../src/shared/units.js';
import { cell, table } from './table.js';

/** The state as an operator reads it: workers, sessions, reservations. */
export function stateView(state: ClusterState): string {
  const workers = workersById(state);
  const sessions = [...state.sessions.values()].sort((a, b) =>
    compareText(a.sessionId, b.sessionId),
  );
  const reservations = [...state.reservations.values()].sort((a, b) =>
    compareText(a.requestId, b.requestId),
  );
  const lines = [
    `State after seq ${state.lastSeq}; router ${cell(state.routerVersion)} started ${cell(state.routerStartedAt)}; catalogue ${state.catalogue?.revision ?? 'none'}`,
    '',
    `Workers (${workers.length})`,
    table(
      [
        'WORKER',
        'STATUS',
        'FLAVOR',
        'ADDRESS',
        'MEMORY (USED+RESERVED/TOTAL)',
        'CPU',
        'IN FLIGHT',
        'CONTAINERS',
        'PROBE FAILS',
        'LAST HEARD',
      ],
      workers.map((w) => [
        w.workerId,
        w.status === 'evicted'
          ? `evicted (${w.evictedReason ?? '?'})`
          : w.status === 'error'
            ? `error: ${w.error ?? ''}`
            : w.status,
        w.flavor,
        cell(w.address),
        `${formatSize(memoryCommitted(w))}/${w.memoryTotal === null ? '-' : formatSize(w.memoryTotal)}`,
        w.utilization?.cpuUsed === null || w.utilization?.cpuUsed === undefined
          ? '-'
          : `${w.utilization.cpuUsed}/${w.utilization.cpuTotal ?? '-'}`,
        w.inFlight,
        `${w.containers.size}/${w.maxContainers ?? '-'}`,
        w.probeFailures,
        w.lastHeardAt,
      ]),
    ),
    '',
    `Sessions (${sessions.length})`,
    table(
      ['SESSION', 'PIN', 'CHECKPOINT', 'PINNED BY', 'EXPIRED'],
      sessions.map((s) => [
        s.sessionId,
        s.pin ? `${s.pin.workerId}/${s.pin.containerId}` : '-',
        cell(s.pin?.checkpointId),
        cell(s.pinnedBy),
        s.expired ? `${s.expired.reason} at seq ${s.expired.seq}` : '-',
      ]),
    ),
    '',
    `Reservations (${reservations.length})`,
    table(
      ['REQUEST', 'SESSION', 'WORKER', 'CONTAINER', 'CHECKPOINT', 'MEMORY', 'SINCE'],
      reservations.map((r) => [
        r.requestId,
        cell(r.sessionId),
        r.workerId,
        cell(r.containerId),
        cell(r.checkpointId),
        formatSize(r.memory),
        r.since,
      ]),
    ),
  ];
  return `${lines.join('\n')}\n`;
}
