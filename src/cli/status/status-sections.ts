/**
 * `readie status` as a readable page: one section per part of `AdminService.Status`, each a
 * small renderer listed in {@link STATUS_SECTIONS}, so a new part of the answer (the tenant pin
 * table, say) is one more entry. Pure: the answer and the time it is read at come in. Every
 * string of the answer is made printable before a section sees it (`src/shared/printable.ts`):
 * tenants chose many of them (session and request IDs, checkpoints, messages).
 */
import type {
  ReservationView,
  SessionView,
  StatusResponse,
  WorkerView,
} from '../../proto/gen/readie/v1/admin.js';
import { printableData } from '../../shared/printable.js';
import { table } from '../text-table.js';
import { logSection } from './log-section.js';
import { queueSection } from './queue-section.js';
import { age, roughSize } from './readable-units.js';

export { age, roughSize } from './readable-units.js';

/** One part of the page: its title and its body (null: nothing to show). */
export interface StatusSection {
  readonly title: string;
  /** The body of an answer whose strings are printable already (see `renderStatus`). */
  render(status: StatusResponse, now: number): string | null;
}

function memory(worker: WorkerView): string {
  const total = worker.memoryTotal === undefined ? '?' : roughSize(worker.memoryTotal);
  return `${roughSize(worker.memoryUsed)} + ${roughSize(worker.memoryReserved)} / ${total}`;
}

function containers(worker: WorkerView): string {
  const byState = new Map<string, number>();
  for (const container of worker.containers) {
    byState.set(container.state, (byState.get(container.state) ?? 0) + 1);
  }
  const parts = [...byState].map(([state, count]) => `${count} ${state}`);
  const limit = worker.maxContainers === undefined ? '' : ` (max ${worker.maxContainers})`;
  return `${worker.containers.length}${limit}${parts.length ? `: ${parts.join(', ')}` : ''}`;
}

function workerStatus(worker: WorkerView): string {
  return worker.reason === '' ? worker.status : `${worker.status} (${worker.reason})`;
}

/** The router, the log and the counts. */
const routerSection: StatusSection = {
  title: 'Router',
  render(status, now) {
    const byStatus = new Map<string, number>();
    for (const worker of status.workers) {
      byStatus.set(worker.status, (byStatus.get(worker.status) ?? 0) + 1);
    }
    const workers = [...byStatus].map(([name, count]) => `${count} ${name}`).join(', ');
    return [
      `version ${status.routerVersion || '?'}, started ${age(status.routerStartedAt, now)} ago`,
      `log seq ${status.lastSeq}, catalogue ${status.catalogueRevision || '(none)'}`,
      `workers: ${workers || 'none'}; calls in flight ${status.callsInFlight}, waiting for their session ${status.callsWaiting}`,
    ].join('\n');
  },
};

/** Every worker the router knows, evicted ones too. */
const workersSection: StatusSection = {
  title: 'Workers',
  render(status, now) {
    if (status.workers.length === 0) return 'none registered';
    const rows = status.workers.map((worker: WorkerView) => [
      worker.workerId,
      workerStatus(worker),
      worker.address || '-',
      worker.flavor || '-',
      memory(worker),
      containers(worker),
      String(worker.inFlight),
      `${age(worker.lastReportAt, now)} ago`,
      worker.probeFailures === 0
        ? '0'
        : `${worker.probeFailures}${worker.lastProbeProblem ? `: ${worker.lastProbeProblem}` : ''}`,
    ]);
    return table(
      [
        'worker',
        'status',
        'address',
        'flavor',
        'memory used + reserved / total',
        'containers',
        'in flight',
        'last report',
        'probe failures',
      ],
      rows,
    );
  },
};

/** The calls that failed on each worker, as the router that answered saw them end. */
const failuresSection: StatusSection = {
  title: 'Recent failures (calls that failed on a worker, as this router saw them; newest first)',
  render(status, now) {
    const lines: string[] = [];
    for (const worker of status.workers) {
      if (worker.failures === 0) continue;
      lines.push(
        `${worker.workerId}: ${worker.failures} failed call${worker.failures === 1 ? '' : 's'} since the router started`,
      );
      for (const failure of worker.recentFailures) {
        lines.push(
          `  ${age(failure.at, now)} ago  ${failure.requestId || '-'}  ${failure.code}: ${failure.message}`,
        );
      }
    }
    return lines.length === 0 ? null : lines.join('\n');
  },
};

/** Sessions: where each is pinned and for how long its container has been in its state. */
const sessionsSection: StatusSection = {
  title: 'Sessions',
  render(status, now) {
    if (status.sessions.length === 0) return null;
    const rows = status.sessions.map((session: SessionView) => [
      session.sessionId,
      session.state === 'expired' ? `expired (${session.expiredReason})` : session.state,
      session.workerId ? `${session.workerId}/${session.containerId}` : '-',
      session.checkpointId || '-',
      session.state === 'expired' ? `${age(session.expiredAt, now)} ago` : age(session.since, now),
    ]);
    return table(['session', 'state', 'pinned to', 'checkpoint', 'age'], rows);
  },
};

/** Reservations: calls placed and not released. */
const reservationsSection: StatusSection = {
  title: 'Reservations',
  render(status, now) {
    if (status.reservations.length === 0) return null;
    const rows = status.reservations.map((reservation: ReservationView) => [
      reservation.requestId,
      reservation.sessionId || '-',
      reservation.containerId
        ? `${reservation.workerId}/${reservation.containerId}`
        : reservation.workerId,
      roughSize(reservation.memory),
      `${age(reservation.since, now)}`,
    ]);
    return table(['request', 'session', 'on', 'memory', 'held for'], rows);
  },
};

/** The page's sections, in order. */
export const STATUS_SECTIONS: readonly StatusSection[] = [
  routerSection,
  logSection,
  workersSection,
  queueSection,
  failuresSection,
  sessionsSection,
  reservationsSection,
];

/** A message on one line: its runs of white space (line breaks, a traceback's indent) as one space. */
function oneLine(message: string): string {
  return message.replace(/\s+/g, ' ');
}

/** The answer with the workers' free-text messages on one line each, as the page shows them. */
function messagesOnOneLine(status: StatusResponse): StatusResponse {
  return {
    ...status,
    workers: status.workers.map((worker) => ({
      ...worker,
      lastProbeProblem: oneLine(worker.lastProbeProblem),
      recentFailures: worker.recentFailures.map((failure) => ({
        ...failure,
        message: oneLine(failure.message),
      })),
    })),
  };
}

/** The whole page for one answer: its strings made printable, then each section. */
export function renderStatus(status: StatusResponse, now: number): string {
  const shown = printableData(messagesOnOneLine(status));
  const parts: string[] = [];
  for (const section of STATUS_SECTIONS) {
    const body = section.render(shown, now);
    if (body !== null) parts.push(`${section.title}\n${body}`);
  }
  return `${parts.join('\n\n')}\n`;
}
