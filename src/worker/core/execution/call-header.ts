/** Reading and checking the router's CallHeader: the first message of every Execute stream. Pure. */
import { PayloadFormat } from '../../../proto/gen/readie/v1/call.js';
import type { ExecuteRequest } from '../../../proto/gen/readie/v1/execution.js';
import { memoryBudget } from '../../../shared/call-budget.js';
import { InvalidCallError, PythonVersionMismatchError, WrongWorkerError } from '../errors.js';
import { requirementProblem } from '../packages/install-command.js';
import type { ImageDeclaration } from '../images/image-identity.js';
import { MAX_BATCH_INPUTS, MAX_INPUTS_AT_ONCE } from '../executor-link/outcomes.js';

/** The executor's names for the payload formats. */
export type ExecutorFormat = 'cloudpickle' | 'json-call';

/** A call as the worker runs it. */
export interface CallRequest {
  readonly requestId: string;
  readonly sessionId: string;
  /** The container to resume; empty to create one. */
  readonly containerId: string;
  /** The checkpoint to restore a new container from; empty for a cold start. */
  readonly checkpointId: string;
  /** The memory budget in bytes: the container's limit. */
  readonly memory: number;
  /** The GPU memory budget in bytes (0: none); the container holds it while it lives. */
  readonly gpuMemory: number;
  readonly packages: readonly string[];
  readonly imports: readonly string[];
  /** The client's Python version; empty when the client is not Python (json-call). */
  readonly pythonVersion: string;
  readonly format: ExecutorFormat;
  /**
   * A pinned call's version (docs/tenant-routing.md): its container must be restored from exactly
   * this checkpoint, never started cold; empty for any other call.
   */
  readonly version: string;
  /** The router expects the version not to be resident here: it is loaded first. */
  readonly coldLoad: boolean;
  /** The routing revision the version was resolved from (0: none), for logs. */
  readonly routingRevision: number;
  /** The call's image (docs/images.md), or null. */
  readonly image: ImageDeclaration | null;
  /** The caller's tenant from its credential ('' without one): images are scoped by it. */
  readonly tenantId: string;
  /** A batch's input count (docs/executor-protocol.md); 0 for a plain call. */
  readonly inputs: number;
  /** How many inputs of the batch its container runs at once (1: one at a time). */
  readonly maxInputs: number;
}

/** What the header is checked against. */
export interface HeaderContext {
  readonly workerId: string;
  /** The budget of a header that names none (DEFAULT_MEMORY). */
  readonly defaultMemory: number;
  /** The sandbox's Python version, e.g. 3.11.2. */
  readonly sandboxPython: string;
}

/** `3.11` of `3.11.2`; null when the text is not a version. */
export function majorMinor(version: string): string | null {
  const match = /^\s*(\d+)\.(\d+)/.exec(version);
  return match ? `${match[1]}.${match[2]}` : null;
}

/** Why a client's Python cannot run in the sandbox, or null when it can (or did not say). */
export function pythonVersionProblem(client: string, sandbox: string): string | null {
  if (client.trim() === '') return null;
  const wanted = majorMinor(client);
  if (wanted === null) return `the client's Python version "${client}" is not a version`;
  if (wanted === majorMinor(sandbox)) return null;
  return `the client runs Python ${client} but this worker's sandbox runs Python ${sandbox}: pickled code only loads on the same major.minor version`;
}

function executorFormat(format: PayloadFormat): ExecutorFormat {
  switch (format) {
    case PayloadFormat.PAYLOAD_FORMAT_CLOUDPICKLE:
      return 'cloudpickle';
    case PayloadFormat.PAYLOAD_FORMAT_JSON_CALL:
      return 'json-call';
    case PayloadFormat.PAYLOAD_FORMAT_UNSPECIFIED:
      break;
  }
  throw new InvalidCallError(
    `the header names no known payload format (${String(format)}): set PAYLOAD_FORMAT_CLOUDPICKLE or PAYLOAD_FORMAT_JSON_CALL`,
  );
}

/** The call a first message describes; throws the error the call must end with if it is unfit. */
export function readHeader(
  message: ExecuteRequest | undefined,
  context: HeaderContext,
): CallRequest {
  if (message?.message?.$case !== 'header') {
    throw new InvalidCallError('the first message of an Execute stream must be a CallHeader');
  }
  const header = message.message.value;
  const ids = header.ids;
  if (!ids || ids.requestId === '') {
    throw new InvalidCallError('the CallHeader has no request ID');
  }
  if (ids.workerId !== '' && ids.workerId !== context.workerId) {
    throw new WrongWorkerError(
      `the call was placed on worker ${ids.workerId} but reached worker ${context.workerId}`,
    );
  }
  const format = executorFormat(header.format);
  for (const requirement of header.packages) {
    const problem = requirementProblem(requirement);
    if (problem) throw new InvalidCallError(`cannot install packages: ${problem}`);
  }
  for (const requirement of header.image?.packages ?? []) {
    const problem = requirementProblem(requirement);
    if (problem) throw new InvalidCallError(`cannot build the image: ${problem}`);
  }
  const mismatch = pythonVersionProblem(header.pythonVersion, context.sandboxPython);
  if (mismatch) throw new PythonVersionMismatchError(mismatch);
  if (header.version !== '' && ids.containerId === '' && ids.checkpointId !== header.version) {
    throw new InvalidCallError(
      `the header names version "${header.version}" but checkpoint "${ids.checkpointId}": a pinned call's container is restored from its version`,
    );
  }
  const inputs = header.inputs ?? 0;
  const maxInputs = header.maxInputs ?? 0;
  if (inputs > MAX_BATCH_INPUTS || maxInputs > MAX_INPUTS_AT_ONCE) {
    throw new InvalidCallError(
      `a batch carries at most ${MAX_BATCH_INPUTS} inputs and runs at most ${MAX_INPUTS_AT_ONCE} at once, not ${inputs} and ${maxInputs}`,
    );
  }
  return {
    requestId: ids.requestId,
    sessionId: ids.sessionId,
    containerId: ids.containerId,
    checkpointId: ids.checkpointId,
    // On the wire 0 is "not set": the budget is then DEFAULT_MEMORY, as the router's would be.
    memory: memoryBudget(header.memory > 0 ? header.memory : null, context.defaultMemory),
    gpuMemory: header.gpuMemory ?? 0,
    packages: header.packages,
    imports: header.imports,
    pythonVersion: header.pythonVersion,
    format,
    version: header.version,
    coldLoad: header.coldLoad,
    routingRevision: header.routingRevision,
    image: header.image
      ? { packages: header.image.packages, imports: header.image.imports, env: header.image.env }
      : null,
    tenantId: header.tenantId,
    inputs,
    maxInputs: Math.max(1, maxInputs),
  };
}
