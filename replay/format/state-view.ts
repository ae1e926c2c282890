/** The readable view of `replay state`. */
import type { ClusterState, Reservation, SessionRecord } from '../../src/projections/index.js';
import { memoryCommitted, workersById } from '../../src/projections/index.js';
import { compareText } from '../../src/projections/queries.js';
import { printableData } from '../../src/shared/printable.js';
import { formatSize } from '../../src/shared/units.js';
import { cell, table } from './table.js';

/** Sessions as a table: pin, checkpoint, who pinned it, expiry. */
export function sessionsTable(sessions: readonly SessionRecord[]): string {
  return table(
    ['SESSION', 'PIN', 'CHECKPOINT', 'PINNED BY', 'EXPIRED'],
    sessions.map((s) => [
      s.sessionId,
      s.pin ? `${s.pin.workerId}/${s.pin.containerId}` : '-',
      cell(s.pin?.checkpointId),
      cell(s.pinnedBy),
      s.expired ? `${s.expired.reason} at seq ${s.expired.seq}` : '-',
    ]),
  );
}

/** Reservations (calls in flight) as a table: where they run and the memory they hold. */
export function reservationsTable(reservations: readonly Reservation[]): string {
  return table(
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
  );
}

/** Reservations sorted by request ID. */
export function sortedReservations(reservations: Iterable<Reservation>): Reservation[] {
  return [...reservations].sort((a, b) => compareText(a.requestId, b.requestId));
}

/** The state as an operator reads it: workers, sessions, reservations (every string printable). */
export function stateView(folded: ClusterState): string {
  const state = printableData(folded);
  const workers = workersById(state);
  const sessions = [...state.sessions.values()].sort((a, b) =>
    compareText(a.sessionId, b.sessionId),
  );
  const reservations = sortedReservations(state.reservations.values());
  const lines = [
    `State after seq ${state.lastSeq}; router ${cell(state.routerVersion)} started ${cell(state.routerStartedAt)}, placement rules ${state.rulesVersion === null ? 'unrecorded (v1)' : `v${state.rulesVersion}`}; catalogue ${state.catalogue?.revision ?? 'none'}`,
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
    sessionsTable(sessions),
    '',
    `Reservations (${reservations.length})`,
    reservationsTable(reservations),
  ];
  return `${lines.join('\n')}\n`;
}
