/**
 * Worker reports as events (pure). The registry service translates the wire messages into these
 * plain reports (refusing malformed ones) and appends what these functions return.
 */
import type { ContainerState, Flavor, RegistrationStatus } from '../../events/schema.js';
import { causeOf } from '../../events/cause.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { containerRemovedEvents, liveWorkerOf } from '../consequences/index.js';
import type { Decision } from '../decision.js';

/** A worker's status report: its registration (ready or error) or its departure (removed). */
export interface StatusReport {
  readonly workerId: string;
  readonly status: RegistrationStatus | 'removed';
  readonly address: string | null;
  readonly error: string | null;
  readonly flavor: Flavor;
  /** Bytes; null when the worker did not say. */
  readonly memoryTotal: number | null;
  /** Null for no limit. */
  readonly maxContainers: number | null;
  /** Bytes; null for none. */
  readonly gpuMemoryTotal: number | null;
}

/** A worker's periodic load report. */
export interface UtilizationReport {
  readonly workerId: string;
  readonly memoryUsed: number;
  readonly containerCount: number;
  readonly cpuUsed: number | null;
  readonly cpuTotal: number | null;
  readonly gpuMemoryUsed: number | null;
}

/** A container's change of state. */
export interface ContainerReport {
  readonly workerId: string;
  readonly containerId: string;
  readonly state: ContainerState;
  /** Null for a cold start. */
  readonly checkpointId: string | null;
}

/** The router's answer to a load or container report, and the events to append. */
export interface ReportOutcome {
  /** False when the router does not know the worker (or evicted it): it must report its status. */
  readonly registered: boolean;
  readonly events: readonly NewEvent[];
}

/**
 * A status report: `ready` and `error` register the worker (`WorkerRegistered`; an error status is
 * never placeable); `removed` is `WorkerLeaving` (no new work, running calls finish), and nothing
 * for a worker the router does not know or has evicted.
 */
export function statusReportEvents(state: ClusterState, report: StatusReport): NewEvent[] {
  if (report.status === 'removed') {
    return liveWorkerOf(state, report.workerId)
      ? [{ type: 'WorkerLeaving', workerId: report.workerId }]
      : [];
  }
  return [
    {
      type: 'WorkerRegistered',
      workerId: report.workerId,
      address: report.address,
      status: report.status,
      error: report.status === 'error' ? (report.error ?? 'no reason given') : null,
      flavor: report.flavor,
      memoryTotal: report.memoryTotal,
      maxContainers: report.maxContainers,
      gpuMemoryTotal: report.gpuMemoryTotal,
    },
  ];
}

/** A load report: `WorkerUtilization`, or unregistered (no event) for an unknown worker. */
export function utilizationReportEvents(
  state: ClusterState,
  report: UtilizationReport,
): ReportOutcome {
  if (!liveWorkerOf(state, report.workerId)) return { registered: false, events: [] };
  return { registered: true, events: [{ type: 'WorkerUtilization', ...report }] };
}

/**
 * A container report: `ContainerStateChanged`, and for `removed` the `SessionExpired` of the
 * session pinned there; unregistered (no event) for an unknown worker.
 */
export function containerReportEvents(state: ClusterState, report: ContainerReport): ReportOutcome {
  if (!liveWorkerOf(state, report.workerId)) return { registered: false, events: [] };
  if (report.state === 'removed') {
    return {
      registered: true,
      events: containerRemovedEvents(
        state,
        report.workerId,
        report.containerId,
        report.checkpointId,
      ),
    };
  }
  return { registered: true, events: [{ type: 'ContainerStateChanged', ...report }] };
}

/** A report's decision: its events, and whether the router knows the worker. */
export interface ReportDecision extends Decision {
  /** False when the router does not know the worker (or evicted it): it must report its status. */
  readonly registered: boolean;
}

/** A status report's decision (`report:WORKER`). */
export function decideStatusReport(state: ClusterState, report: StatusReport): ReportDecision {
  return {
    cause: causeOf('report', report.workerId),
    registered: true,
    events: statusReportEvents(state, report),
  };
}

/** A load report's decision (`report:WORKER`). */
export function decideUtilizationReport(
  state: ClusterState,
  report: UtilizationReport,
): ReportDecision {
  return { cause: causeOf('report', report.workerId), ...utilizationReportEvents(state, report) };
}

/** A container report's decision (`report:WORKER`). */
export function decideContainerReport(
  state: ClusterState,
  report: ContainerReport,
): ReportDecision {
  return { cause: causeOf('report', report.workerId), ...containerReportEvents(state, report) };
}
