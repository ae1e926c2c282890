/**
 * `RegistryService` (shell): worker reports become events. Each handler first checks that the
 * caller's credential names the worker the report is about (`PERMISSION_DENIED` otherwise, before
 * anything reaches the log), validates the message into a plain report (`INVALID_ARGUMENT` naming
 * the field otherwise), asks the core for the report's decision
 * (`src/core/registry/report-events.ts`), records it and answers.
 */
import type { Metadata, sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import {
  ContainerState,
  Flavor,
  WorkerStatus,
  type ContainerEntry as WireContainerEntry,
  type RegistryServiceServer,
  type ReportContainerStateRequest,
  type ReportContainerStateResponse,
  type ReportHeldImagesResponse,
  type ReportImageResponse,
  type ReportStatusRequest,
  type ReportStatusResponse,
  type ReportUtilizationRequest,
  type ReportUtilizationResponse,
} from '../../proto/gen/readie/v1/registry.js';
import { InvalidReportError } from '../../core/errors.js';
import {
  ResidencyState,
  type ReportResidencyRequest,
  type ReportResidencyResponse,
} from '../../proto/gen/readie/v1/residency.js';
import type { ResidencyReport, VersionReport } from '../../core/pins/residency-report.js';
import type { ResidencyState as ResidencyStateName } from '../../events/schema.js';
import { toServiceError } from '../grpc-status.js';
import { heldImagesReportOf, imageReportOf } from './image-reports.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import {
  describePrincipal,
  PermissionDeniedError,
  type RouterCredentials,
} from '../security/index.js';
import type {
  ContainerEntry,
  ContainerReport,
  StatusReport,
  UtilizationReport,
} from '../../core/registry/report-events.js';
import { decide, type DecisionOf } from '../../core/decisions.js';

/** What the registry service needs. */
export interface RegistryServiceOptions {
  readonly journal: Journal;
  readonly logger: Logger;
  /** Who is reporting: a worker's credential may report as that worker alone. */
  readonly credentials: RouterCredentials;
  /**
   * Whether a worker at `address` answers a health probe now (`SERVING`): asked of the instance
   * holding a worker ID when another one registers with that ID from another address.
   */
  readonly answersProbe: (address: string) => Promise<boolean>;
}

/**
 * Throws PermissionDeniedError unless the caller may report as `workerId`: its own worker
 * credential, or a development mode (which names no one and allows everything).
 */
function checkReporter(
  credentials: RouterCredentials,
  metadata: Metadata,
  path: string,
  workerId: string,
): void {
  const principal = credentials.authorize(metadata, path);
  if (principal.kind === 'anyone') return;
  if (principal.kind === 'worker' && principal.workerId === workerId) return;
  throw new PermissionDeniedError(
    `${describePrincipal(principal)} may not report as worker "${workerId}": ` +
      'a worker reports as the worker ID its credential names, and only as that one',
  );
}

function required(value: string, field: string): string {
  if (value === '') throw new InvalidReportError(`${field} is required`);
  return value;
}

function nonNegative(value: number, field: string): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new InvalidReportError(`${field} must be a number >= 0, got ${value}`);
  }
  return value;
}

/** Zero means "not reported" for capacities in the wire contract. */
function zeroAsNull(value: number): number | null {
  return value === 0 ? null : value;
}

const ENTRY_STATES: Partial<Record<ContainerState, ContainerEntry['state']>> = {
  [ContainerState.CONTAINER_STATE_BUSY]: 'busy',
  [ContainerState.CONTAINER_STATE_READY]: 'ready',
  [ContainerState.CONTAINER_STATE_ERROR]: 'error',
};

/** A report's number from the wire: 0 is none. */
function reportSeqOf(value: number): number | null {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InvalidReportError(`report_seq must be an integer >= 0, got ${value}`);
  }
  return value === 0 ? null : value;
}

/** The container list of a full report (numbered), or null for a report that is not one. */
function containersOf(
  entries: readonly WireContainerEntry[],
  reportSeq: number | null,
): ContainerEntry[] | null {
  if (reportSeq === null) {
    if (entries.length > 0) {
      throw new InvalidReportError('containers are listed only in a numbered report (report_seq)');
    }
    return null;
  }
  const seen = new Set<string>();
  return entries.map((entry, index) => {
    const containerId = required(entry.containerId, `containers[${index}].container_id`);
    if (seen.has(containerId)) {
      throw new InvalidReportError(`containers lists ${containerId} twice`);
    }
    seen.add(containerId);
    const state = ENTRY_STATES[entry.state];
    if (state === undefined) {
      throw new InvalidReportError(`containers[${index}].state must be BUSY, READY or ERROR`);
    }
    return {
      containerId,
      state,
      checkpointId: entry.checkpointId === '' ? null : entry.checkpointId,
    };
  });
}

/** A status report from the wire, checked. */
export function statusReportOf(request: ReportStatusRequest): StatusReport {
  const workerId = required(request.workerId, 'worker_id');
  const status =
    request.status === WorkerStatus.WORKER_STATUS_READY
      ? 'ready'
      : request.status === WorkerStatus.WORKER_STATUS_ERROR
        ? 'error'
        : request.status === WorkerStatus.WORKER_STATUS_REMOVED
          ? 'removed'
          : undefined;
  if (status === undefined) {
    throw new InvalidReportError('status is required: READY, ERROR or REMOVED');
  }
  let flavor: StatusReport['flavor'] = request.flavor === Flavor.FLAVOR_GPU ? 'gpu' : 'cpu';
  if (request.flavor !== Flavor.FLAVOR_CPU && request.flavor !== Flavor.FLAVOR_GPU) {
    if (status === 'ready') throw new InvalidReportError('flavor is required: CPU or GPU');
    flavor = 'cpu';
  }
  if (status === 'ready') required(request.address, 'address (host:port of ExecutionService)');
  const reportSeq = reportSeqOf(request.reportSeq);
  return {
    workerId,
    status,
    address: request.address === '' ? null : request.address,
    error: request.error === '' ? null : request.error,
    flavor,
    memoryTotal: zeroAsNull(request.memoryTotal),
    maxContainers: zeroAsNull(request.maxContainers),
    gpuMemoryTotal: zeroAsNull(request.gpuMemoryTotal),
    instanceId: request.instanceId === '' ? null : request.instanceId,
    containers: status === 'removed' ? null : containersOf(request.containers, reportSeq),
    reportSeq,
  };
}

/** A load report from the wire, checked. */
export function utilizationReportOf(request: ReportUtilizationRequest): UtilizationReport {
  const reportSeq = reportSeqOf(request.reportSeq);
  return {
    workerId: required(request.workerId, 'worker_id'),
    memoryUsed: request.memoryUsed,
    containerCount: request.containerCount,
    cpuUsed: nonNegative(request.cpuUsed, 'cpu_used'),
    cpuTotal: zeroAsNull(nonNegative(request.cpuTotal, 'cpu_total')),
    gpuMemoryUsed: request.gpuMemoryUsed,
    instanceId: request.instanceId === '' ? null : request.instanceId,
    containers: containersOf(request.containers, reportSeq),
    reportSeq,
    standbys: standbysOf(request.standbys),
  };
}

/** The most checkpoints one load report may list standbys of. */
const MAX_REPORTED_STANDBYS = 256;
/** The longest checkpoint ID a load report may name. */
const MAX_CHECKPOINT_ID_LENGTH = 256;

/** A load report's ready standbys per checkpoint, checked: named, listed once, bounded. */
function standbysOf(
  entries: readonly { checkpointId: string; ready: number }[],
): { checkpointId: string; ready: number }[] {
  if (entries.length > MAX_REPORTED_STANDBYS) {
    throw new InvalidReportError(
      `a load report lists standbys of at most ${MAX_REPORTED_STANDBYS} checkpoints, not ${entries.length}`,
    );
  }
  const seen = new Set<string>();
  return entries.map((entry, index) => {
    const checkpointId = required(entry.checkpointId, `standbys[${index}].checkpoint_id`);
    if (checkpointId.length > MAX_CHECKPOINT_ID_LENGTH) {
      throw new InvalidReportError(
        `standbys[${index}].checkpoint_id is ${checkpointId.length} characters long: at most ${MAX_CHECKPOINT_ID_LENGTH}`,
      );
    }
    if (seen.has(checkpointId)) {
      throw new InvalidReportError(`standbys lists checkpoint ${checkpointId} twice`);
    }
    seen.add(checkpointId);
    return { checkpointId, ready: entry.ready };
  });
}

const CONTAINER_STATES: Partial<Record<ContainerState, ContainerReport['state']>> = {
  [ContainerState.CONTAINER_STATE_BUSY]: 'busy',
  [ContainerState.CONTAINER_STATE_READY]: 'ready',
  [ContainerState.CONTAINER_STATE_ERROR]: 'error',
  [ContainerState.CONTAINER_STATE_REMOVED]: 'removed',
};

/** A container report from the wire, checked. */
export function containerReportOf(request: ReportContainerStateRequest): ContainerReport {
  const state = CONTAINER_STATES[request.state];
  if (state === undefined) {
    throw new InvalidReportError('state is required: BUSY, READY, ERROR or REMOVED');
  }
  return {
    workerId: required(request.workerId, 'worker_id'),
    containerId: required(request.containerId, 'container_id'),
    state,
    checkpointId: request.checkpointId === '' ? null : request.checkpointId,
    instanceId: request.instanceId === '' ? null : request.instanceId,
    reportSeq: reportSeqOf(request.reportSeq),
  };
}

const RESIDENCY_STATES: Partial<Record<ResidencyState, ResidencyStateName>> = {
  [ResidencyState.RESIDENCY_STATE_LOADING]: 'loading',
  [ResidencyState.RESIDENCY_STATE_RESIDENT]: 'resident',
  [ResidencyState.RESIDENCY_STATE_CACHED]: 'cached',
  [ResidencyState.RESIDENCY_STATE_EVICTED]: 'evicted',
  [ResidencyState.RESIDENCY_STATE_FAILED]: 'failed',
};

/** The most versions one residency report may carry. */
const MAX_REPORTED_VERSIONS = 4096;

/** A residency report from the wire, checked. */
export function residencyReportOf(request: ReportResidencyRequest): ResidencyReport {
  if (request.versions.length > MAX_REPORTED_VERSIONS) {
    throw new InvalidReportError(
      `a residency report carries at most ${MAX_REPORTED_VERSIONS} versions, not ${request.versions.length}`,
    );
  }
  const versions = request.versions.map((version, index): VersionReport => {
    const state = RESIDENCY_STATES[version.state];
    if (state === undefined) {
      throw new InvalidReportError(
        `versions[${index}].state is required: LOADING, RESIDENT, CACHED, EVICTED or FAILED`,
      );
    }
    return {
      checkpointId: required(version.checkpointId, `versions[${index}].checkpoint_id`),
      state,
      error: version.error === '' ? null : version.error,
    };
  });
  return {
    workerId: required(request.workerId, 'worker_id'),
    residentMemory: request.residentMemory ?? null,
    versions,
  };
}

/** Runs one unary handler after the reporter check: its answer, or its error as a gRPC status. */
function answer<Req extends { readonly workerId: string }, Res>(
  { logger, credentials }: RegistryServiceOptions,
  call: ServerUnaryCall<Req, Res>,
  callback: sendUnaryData<Res>,
  handle: (request: Req) => Res | Promise<Res>,
): void {
  const refuse = (error: unknown) => {
    const serviceError = toServiceError(error);
    logger.warn(
      {
        path: call.getPath(),
        workerId: call.request.workerId,
        code: serviceError.code,
        problem: serviceError.details,
      },
      'worker report refused',
    );
    callback(serviceError);
  };
  try {
    checkReporter(credentials, call.metadata, call.getPath(), call.request.workerId);
    const handled = handle(call.request);
    if (handled instanceof Promise) handled.then((response) => callback(null, response), refuse);
    else callback(null, handled);
  } catch (error) {
    refuse(error);
  }
}

/** The `RegistryService` implementation. */
export function registryService(options: RegistryServiceOptions): RegistryServiceServer {
  const { journal, logger } = options;

  /** Records a status report's decision (or throws its refusal) and logs what changed. */
  function recordStatus(
    report: StatusReport,
    decision: DecisionOf<'statusReport'>,
  ): ReportStatusResponse {
    const { outcome } = decision;
    if (outcome.kind === 'refused') throw outcome.error;
    const known = journal.state.workers.get(report.workerId);
    journal.record(decision);
    if (report.status === 'removed' && decision.events.length === 0 && known) {
      logger.warn(
        { workerId: report.workerId, instanceId: report.instanceId, holder: known.instanceId },
        'REMOVED from a worker process that does not hold the registration: ignored',
      );
    }
    const restarted = decision.events.some(
      (event) => event.type === 'WorkerEvicted' && event.reason === 'restarted',
    );
    if (restarted) {
      logger.warn(
        {
          workerId: report.workerId,
          address: report.address,
          previous: known?.address ?? null,
          instanceId: report.instanceId,
        },
        "worker restarted: the previous instance's containers and sessions ended",
      );
    }
    const changed =
      !known || known.status !== report.status || known.address !== report.address || restarted;
    if (changed && decision.events.length > 0) {
      logger.info(
        { workerId: report.workerId, status: report.status, address: report.address },
        report.status === 'removed' ? 'worker leaving' : 'worker registered',
      );
    }
    return {};
  }

  return {
    reportStatus(call, callback) {
      answer(
        options,
        call,
        callback,
        (request): ReportStatusResponse | Promise<ReportStatusResponse> => {
          const report = statusReportOf(request);
          const first = decide('statusReport', journal.state, { report });
          if (first.outcome.kind !== 'probe-holder') return recordStatus(report, first);
          const holder = first.outcome.address;
          // Another instance holds the ID elsewhere: it keeps it while it answers its probes.
          return options.answersProbe(holder).then((holderAnswers) => {
            logger.info(
              { workerId: report.workerId, holder, holderAnswers, instanceId: report.instanceId },
              'a worker ID another instance holds registered: probed the holder',
            );
            return recordStatus(
              report,
              decide('statusReport', journal.state, { report, holderAnswers }),
            );
          });
        },
      );
    },
    reportUtilization(call, callback) {
      answer(options, call, callback, (request): ReportUtilizationResponse => {
        const outcome = decide('utilizationReport', journal.state, utilizationReportOf(request));
        journal.record(outcome);
        if (!outcome.registered) {
          logger.info(
            { workerId: request.workerId },
            'load report from an unknown worker: asked to register',
          );
        }
        return { registered: outcome.registered };
      });
    },
    reportContainerState(call, callback) {
      answer(options, call, callback, (request): ReportContainerStateResponse => {
        const report = containerReportOf(request);
        const outcome = decide('containerReport', journal.state, report);
        journal.record(outcome);
        for (const event of outcome.events) {
          if (event.type === 'SessionExpired') {
            logger.info(
              {
                workerId: report.workerId,
                containerId: report.containerId,
                sessionId: event.sessionId,
              },
              'session expired: its container was removed',
            );
          }
        }
        return { registered: outcome.registered };
      });
    },
    reportResidency(call, callback) {
      answer(options, call, callback, (request): ReportResidencyResponse => {
        const outcome = decide('residencyReport', journal.state, residencyReportOf(request));
        journal.record(outcome);
        for (const event of outcome.events) {
          if (event.type === 'ResidencyChanged' && event.state === 'failed') {
            logger.warn(
              { workerId: request.workerId, checkpointId: event.checkpointId, error: event.error },
              'a worker failed to load a version',
            );
          }
        }
        return { registered: outcome.registered };
      });
    },
    reportImage(call, callback) {
      answer(options, call, callback, (request): ReportImageResponse => {
        const outcome = decide('imageReport', journal.state, imageReportOf(request));
        journal.record(outcome);
        return { registered: outcome.registered };
      });
    },
    reportHeldImages(call, callback) {
      answer(options, call, callback, (request): ReportHeldImagesResponse => {
        const report = heldImagesReportOf(request);
        const outcome = decide('heldImagesReport', journal.state, report);
        journal.record(outcome);
        const found = outcome.events.filter((event) => event.type === 'ImageBuilt').length;
        const absent = outcome.events.length - found;
        if (outcome.events.length > 0) {
          logger.info(
            { workerId: report.workerId, held: report.images.length, found, absent },
            "a worker's images reconciled with its report of every image it holds",
          );
        }
        return { registered: outcome.registered };
      });
    },
  };
}
