/**
 * Worker reports as events (pure). The registry service translates the wire messages into these
 * plain reports (refusing malformed ones) and appends what these functions return.
 *
 * A full report (a registration, or a load report listing every container the worker holds) is
 * folded as the truth about the worker's containers (`src/projections/reconcile.ts`); the records
 * it drops are appended as `ContainerStateChanged` `removed`, with the expiry of their sessions.
 * Reports from another process than the registered one (another instance ID) change nothing: that
 * process must register, and a registration for an ID another live process holds is refused.
 */
import type { ContainerState, Flavor, RegistrationStatus } from '../../events/schema.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import {
  isStaleContainerReport,
  reconcile,
  type ContainerEntry,
} from '../../projections/reconcile.js';
import { reportOpensRoom, type RoomDecision } from '../admission/room.js';
import { containerRemovedEvents, evictionEvents, seqAfter } from '../consequences/index.js';
import type { Decision } from '../decision.js';
import { WorkerIdTakenError } from '../errors.js';
import { instanceMatch } from './worker-identity.js';

export type { ContainerEntry } from '../../projections/reconcile.js';

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
  /** The reporting process (new at each start of the worker); null when it names none. */
  readonly instanceId: string | null;
  /** Every container it holds, for a full report; null when it lists none. */
  readonly containers: readonly ContainerEntry[] | null;
  /** The report's number in the worker's sequence; null when it carries none. */
  readonly reportSeq: number | null;
}

/** A worker's periodic load report. */
export interface UtilizationReport {
  readonly workerId: string;
  readonly memoryUsed: number;
  readonly containerCount: number;
  readonly cpuUsed: number | null;
  readonly cpuTotal: number | null;
  readonly gpuMemoryUsed: number | null;
  readonly instanceId: string | null;
  /** Every container it holds (a full report), or null for a count alone. */
  readonly containers: readonly ContainerEntry[] | null;
  readonly reportSeq: number | null;
  /** Its ready standbys per checkpoint (none listed: none ready); absent or null: not reported. */
  readonly standbys?: readonly { readonly checkpointId: string; readonly ready: number }[] | null;
}

/** A container's change of state. */
export interface ContainerReport {
  readonly workerId: string;
  readonly containerId: string;
  readonly state: ContainerState;
  /** Null for a cold start. */
  readonly checkpointId: string | null;
  readonly instanceId: string | null;
  readonly reportSeq: number | null;
}

/** The router's answer to a load or container report, and the events to append. */
export interface ReportOutcome {
  /**
   * False when the router does not know the worker (or evicted it), or the report comes from
   * another process than the registered one: it must report its status.
   */
  readonly registered: boolean;
  readonly events: readonly NewEvent[];
}

/** What a status report comes to. */
export type StatusOutcome =
  | { readonly kind: 'events'; readonly events: readonly NewEvent[] }
  /**
   * Another instance holds the worker ID at another address: whether it still answers a health
   * probe decides (`holderAnswers`).
   */
  | { readonly kind: 'probe-holder'; readonly address: string }
  /** Another live instance holds the worker ID: the registration is refused. */
  | { readonly kind: 'refused'; readonly error: WorkerIdTakenError };

/**
 * `ContainerStateChanged` `removed` and its session's expiry for each record a full report drops;
 * the report is the decision's first event, so it ended those sessions.
 */
function droppedEvents(
  state: ClusterState,
  worker: WorkerRecord | undefined,
  containers: readonly ContainerEntry[] | null,
  reportSeq: number | null,
): NewEvent[] {
  if (!worker || containers === null) return [];
  const { dropped } = reconcile(worker, containers, reportSeq);
  return dropped.flatMap((containerId) => {
    const record = worker.containers.get(containerId);
    return containerRemovedEvents(
      state,
      worker.workerId,
      containerId,
      record?.checkpointId ?? null,
      reportSeq,
      seqAfter(state),
    );
  });
}

function registeredEvent(report: StatusReport, status: RegistrationStatus): NewEvent {
  return {
    type: 'WorkerRegistered',
    workerId: report.workerId,
    address: report.address,
    status,
    error: status === 'error' ? (report.error ?? 'no reason given') : null,
    flavor: report.flavor,
    memoryTotal: report.memoryTotal,
    maxContainers: report.maxContainers,
    gpuMemoryTotal: report.gpuMemoryTotal,
    instanceId: report.instanceId,
    containers: report.containers === null ? null : [...report.containers],
    reportSeq: report.reportSeq,
  };
}

/**
 * A status report: `ready` and `error` register the worker (`WorkerRegistered`; an error status is
 * never placeable); `removed` is `WorkerLeaving` (no new work, running calls finish), and nothing
 * for a worker the router does not know, has evicted, or holds as another process.
 *
 * A registration for an ID another instance holds: at the same address it is a restart (the old
 * process is gone: its port is taken), at another address one when the holder no longer answers
 * its probes (`holderAnswers` false); the old instance is then evicted (`restarted`) first, which
 * ends its containers and sessions. A holder that answers refuses the registration.
 */
export function statusReportEvents(
  state: ClusterState,
  report: StatusReport,
  holderAnswers?: boolean,
): StatusOutcome {
  const match = instanceMatch(state, report.workerId, report.instanceId);
  if (report.status === 'removed') {
    return {
      kind: 'events',
      events: match.kind === 'same' ? [{ type: 'WorkerLeaving', workerId: report.workerId }] : [],
    };
  }
  const registered = registeredEvent(report, report.status);
  if (match.kind !== 'other') {
    const worker = match.kind === 'same' ? match.worker : undefined;
    return {
      kind: 'events',
      events: [registered, ...droppedEvents(state, worker, report.containers, report.reportSeq)],
    };
  }
  const { holder } = match;
  const sameAddress = holder.address !== null && holder.address === report.address;
  if (!sameAddress && holder.address !== null && holderAnswers === undefined) {
    return { kind: 'probe-holder', address: holder.address };
  }
  if (!sameAddress && holderAnswers === true) {
    return { kind: 'refused', error: new WorkerIdTakenError(report.workerId, holder) };
  }
  return {
    kind: 'events',
    events: [...evictionEvents(state, report.workerId, 'restarted', seqAfter(state)), registered],
  };
}

/**
 * A load report: `WorkerUtilization` (and for a full report the removal of the records it no
 * longer lists), or unregistered (no event) for an unknown worker or another process.
 */
export function utilizationReportEvents(
  state: ClusterState,
  report: UtilizationReport,
): ReportOutcome {
  const match = instanceMatch(state, report.workerId, report.instanceId);
  if (match.kind !== 'same') return { registered: false, events: [] };
  const { instanceId: _instance, ...fields } = report;
  return {
    registered: true,
    events: [
      {
        type: 'WorkerUtilization',
        ...fields,
        containers: report.containers === null ? null : [...report.containers],
        standbys: report.standbys?.map((entry) => ({ ...entry })) ?? null,
      },
      ...droppedEvents(state, match.worker, report.containers, report.reportSeq),
    ],
  };
}

/**
 * A container report: `ContainerStateChanged`, and for `removed` the `SessionExpired` of the
 * session pinned there; nothing for a report older than what the router already heard, nor for
 * the removal of a container it holds no record and no session of (already gone);
 * unregistered (no event) for an unknown worker or another process.
 */
export function containerReportEvents(state: ClusterState, report: ContainerReport): ReportOutcome {
  const match = instanceMatch(state, report.workerId, report.instanceId);
  if (match.kind !== 'same') return { registered: false, events: [] };
  if (
    isStaleContainerReport(match.worker, report.containerId, report.reportSeq) &&
    !endsUnreportedSessionContainer(match.worker, report)
  ) {
    return { registered: true, events: [] };
  }
  if (report.state === 'removed') {
    return {
      registered: true,
      events: containerRemovedEvents(
        state,
        report.workerId,
        report.containerId,
        report.checkpointId,
        report.reportSeq,
        seqAfter(state),
      ),
    };
  }
  const { instanceId: _instance, ...fields } = report;
  return { registered: true, events: [{ type: 'ContainerStateChanged', ...fields }] };
}

/**
 * Whether `report` says a session container the worker had reported nothing of (rules 7 on:
 * `sessionContainers`, no record) is gone: however old, it is recorded, since only it (or a
 * second full report leaving the container out) frees the slot the container holds. Its earlier
 * reports may have been judged out of date behind a full report that overtook them.
 */
function endsUnreportedSessionContainer(worker: WorkerRecord, report: ContainerReport): boolean {
  return (
    (report.state === 'removed' || report.state === 'error') &&
    worker.sessionContainers.has(report.containerId) &&
    !worker.containers.has(report.containerId)
  );
}

/** A report's decision: its events, and whether the router knows the worker. */
export interface ReportDecision extends Decision {
  /** False when the router does not know the worker (or evicted it): it must report its status. */
  readonly registered: boolean;
}

/** What a status report's decision is given. */
export interface StatusReportInput {
  readonly report: StatusReport;
  /**
   * Whether the instance holding the worker ID at another address answered a health probe, once
   * the shell asked it (`probe-holder`); undefined before.
   */
  readonly holderAnswers?: boolean;
}

/** A status report's decision (`report:WORKER`), with what it came to. */
export interface StatusDecision extends ReportDecision {
  readonly outcome: StatusOutcome;
}

/** A status report's decision (`report:WORKER`). */
export function decideStatusReport(state: ClusterState, input: StatusReportInput): StatusDecision {
  const outcome = statusReportEvents(state, input.report, input.holderAnswers);
  return {
    cause: { kind: 'report', workerId: input.report.workerId },
    registered: outcome.kind === 'events',
    events: outcome.kind === 'events' ? outcome.events : [],
    outcome,
  };
}

/** A load report's decision (`report:WORKER`). */
export function decideUtilizationReport(
  state: ClusterState,
  report: UtilizationReport,
): ReportDecision & RoomDecision {
  const outcome = utilizationReportEvents(state, report);
  return {
    cause: { kind: 'report', workerId: report.workerId },
    ...outcome,
    // Read by the admitter: a report that makes no room is no reason to decide admission again
    // (and with nothing queued there is nothing to admit: not worked out).
    opensRoom:
      outcome.registered &&
      state.queue.size > 0 &&
      reportOpensRoom(state.workers.get(report.workerId), report),
  };
}

/** A container report's decision (`report:WORKER`). */
export function decideContainerReport(
  state: ClusterState,
  report: ContainerReport,
): ReportDecision {
  return {
    cause: { kind: 'report', workerId: report.workerId },
    ...containerReportEvents(state, report),
  };
}
