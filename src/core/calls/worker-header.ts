/** What the router tells the worker first (no payload) and the log lines it adds for the client. */
import type { Demand } from '../../events/types.js';
import { LogSource, type CallIds, type LogLine } from '../../proto/gen/readie/v1/call.js';
import type { CallHeader } from '../../proto/gen/readie/v1/execution.js';
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import { isGpuCall } from '../../shared/call-budget.js';
import type { PlacedDecision } from '../placement/index.js';
import { isEmptyImage } from './image-fields.js';

/** The IDs known once the call is placed (the container when reusing a session's). */
export function placedIds(
  requestId: string,
  sessionId: string | null,
  decision: PlacedDecision,
): CallIds {
  return {
    requestId,
    sessionId: sessionId ?? '',
    workerId: decision.workerId,
    containerId: decision.containerId ?? '',
    checkpointId: decision.checkpointId ?? '',
    version: decision.version ?? '',
    routingRevision: decision.routingRevision ?? 0,
  };
}

/**
 * The header of the worker stream: IDs (the container to reuse, empty for a new one; the
 * checkpoint to restore, empty for a cold start), the memory budget reserved, GPU needs, import
 * hints, the packages to install (deduplicated, base-image ones removed), Python version, format,
 * for a batch its input count and how many inputs run at once, the image (built once per worker
 * and tenant) and the caller's tenant, which scopes it.
 */
export function callHeaderOf(
  ids: CallIds,
  config: CallConfig,
  demand: Demand,
  decision: PlacedDecision,
  tenantId: string | null,
): CallHeader {
  return {
    ids,
    memory: decision.memory,
    gpuMemory: demand.gpuMemory ?? undefined,
    gpu: isGpuCall(demand.gpu, demand.gpuMemory),
    imports: [...config.imports],
    packages: [...decision.packages],
    pythonVersion: config.pythonVersion,
    format: config.format,
    version: decision.version ?? '',
    coldLoad: decision.coldLoad,
    routingRevision: decision.routingRevision ?? 0,
    image: isEmptyImage(config.image) ? undefined : config.image,
    tenantId: tenantId ?? '',
    ...(config.inputs ? { inputs: config.inputs } : {}),
    ...(config.maxInputs ? { maxInputs: config.maxInputs } : {}),
  };
}

/** A readie log line telling the client a package was not installed, and why. */
export function skippedPackageLine(entry: string, flavor: string): LogLine {
  return {
    source: LogSource.LOG_SOURCE_SYSTEM,
    text: `package "${entry}" skipped: its distribution is in the base image of ${flavor} workers`,
  };
}
