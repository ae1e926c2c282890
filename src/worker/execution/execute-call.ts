/**
 * One Execute stream (issue 6, steps 2-7): acquire a container, dial its executor, install
 * packages, stream the payload in and the answers out, then release the container.
 */
import { once } from 'node:events';
import { Metadata, status, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { LogSource, type CallIds } from '../../proto/gen/readie/v1/call.js';
import type { ExecuteRequest, ExecuteResponse } from '../../proto/gen/readie/v1/execution.js';
import { chunksOf } from '../../shared/chunks.js';
import { StatusError } from '../../shared/status-error.js';
import type { Container, ContainerPool, SnapshotStart } from '../containers/index.js';
import {
  ExecutorLostError,
  ExecutorTimeoutError,
  InvalidCallError,
  OutOfMemoryError,
  PackageInstallError,
  VersionLoadError,
  VersionMismatchError,
} from '../core/errors.js';
import { NO_TRAILERS, NOT_STARTED, outOfMemoryTrailers } from '../../shared/call-trailers.js';
import {
  decodeLogBody,
  encodeFrame,
  encodeJsonFrame,
  ExecutorConnection,
  ExecutorErrorSchema,
  FrameType,
  frameTypeName,
  MAX_PIECE,
  readFrameBody,
  ResultEndSchema,
} from '../executor-link/index.js';
import type { Installer, PackageSource } from '../packages/index.js';
import type { VersionResidency } from '../residency/index.js';
import { imageName } from '../core/images/index.js';
import type { ImageStore, ImageUse } from '../images/index.js';
import type { ImageLayer } from '../sandbox/index.js';
import { enterImage } from './image-step.js';
import type { CallRequest } from '../core/execution/call-header.js';
import type { CallOutputStore, OutputWriter } from '../output/index.js';
import { abortable, idTrailers } from './call-support.js';
import { INSTALL_LOG_SOURCE, installPackages } from './install-step.js';
import type { MessageReader } from './message-reader.js';
import { BatchRelay } from './batch-relay.js';
import { FrameProtocolError } from '../core/executor-link/frames.js';
import { decodeInputLogBody } from '../core/executor-link/outcomes.js';
import {
  boundedRaised,
  inputsRaisedTrailers,
  raisedLine,
  raisedTrailers,
  type Raised,
} from '../../shared/raised.js';

/** What a call needs from the worker. */
export interface CallDeps {
  readonly workerId: string;
  readonly pool: ContainerPool;
  /** The interpreter the executor runs (for the installer). */
  readonly python: string;
  readonly installer: Installer;
  readonly packageSource: PackageSource;
  /** pip's cache for the host-side fetch of packages. */
  readonly packageCacheDir: string;
  /** DIAL_TOTAL_TIMEOUT. */
  readonly dialTimeoutMs: number;
  /** EXECUTION_TIMEOUT. */
  readonly executionTimeoutMs: number;
  readonly log: Logger;
  /** The worker's versions (loads for pinned calls); null: it holds none. */
  readonly versions?: () => VersionResidency | null;
  /** The worker's images (docs/images.md); absent: calls naming an image are refused. */
  readonly images?: () => ImageStore | null;
  /** Where the call's output is kept for `readie logs` (null or absent: not kept). */
  readonly output?: CallOutputStore | null;
  /** The worker's clock, in epoch ms (stamps kept output). Default `Date.now`. */
  readonly clock?: () => number;
}

/** The router cancelled the call (or its stream broke): stop, clean up, answer nothing. */
export class CallCancelledError extends Error {
  override readonly name = 'CallCancelledError';
}

type Outcome = 'answered' | 'install-failed' | 'failed';

/** The stream type of Execute on the server side. */
export type ExecuteStream = ServerDuplexStream<ExecuteRequest, ExecuteResponse>;

const LOST_DIAGNOSIS_WAIT_MS = 2_000;

/** Runs one call on its stream; never throws (failures end the stream with a status). */
export class ExecuteCall {
  private readonly ids: CallIds;
  private container: Container | null = null;
  private connection: ExecutorConnection | null = null;
  /** Releases the pinned call's hold on its version (never evicted while running). */
  private releaseVersion: () => void = () => undefined;
  /** The call's image, held until the call ends (never evicted while in use). */
  private image: ImageUse | null = null;
  /** Set once a failure already says what happened to the executor (no need to look again). */
  private diagnosed = false;
  /**
   * Set when the call is handed to the executor: from then on the user's function may run, so a
   * failure no longer says `readie-not-started` (src/shared/call-trailers.ts).
   */
  private started = false;
  private signal: AbortSignal = new AbortController().signal;
  private log: Logger;
  /** The call's output as it is kept on disk (every line the router is sent, and readie's notes). */
  private readonly kept: OutputWriter | null;
  private readonly clock: () => number;
  /** What the function raised, as the executor's RESULT_END said (checked); null: it returned. */
  private raised: { readonly raised: Raised; readonly traceback: string } | null = null;
  /** A batch's inputs that raised, once its RESULT_END came; null: not a batch, or not ended. */
  private inputsRaised: number | null = null;

  constructor(
    private readonly stream: ExecuteStream,
    private readonly request: CallRequest,
    private readonly reader: MessageReader<ExecuteRequest>,
    private readonly deps: CallDeps,
  ) {
    this.ids = {
      requestId: request.requestId,
      sessionId: request.sessionId,
      workerId: deps.workerId,
      containerId: '',
      checkpointId: '',
      version: request.version,
      routingRevision: request.routingRevision,
    };
    this.clock = deps.clock ?? Date.now;
    this.kept = deps.output?.begin(request.requestId) ?? null;
    this.log = deps.log.child({
      requestId: request.requestId,
      sessionId: request.sessionId,
      ...(request.version === '' ? {} : { version: request.version, coldLoad: request.coldLoad }),
    });
  }

  /** Runs the call to its end. */
  async run(): Promise<void> {
    const started = performance.now();
    const abort = new AbortController();
    const onCancel = () => abort.abort(new CallCancelledError('the router cancelled the call'));
    this.stream.once('cancelled', onCancel);
    const timer = setTimeout(
      () =>
        abort.abort(
          new ExecutorTimeoutError(
            `the executor did not answer within ${this.deps.executionTimeoutMs} ms (EXECUTION_TIMEOUT)`,
          ),
        ),
      this.deps.executionTimeoutMs,
    );
    abort.signal.addEventListener('abort', () => this.connection?.destroy(), { once: true });
    this.signal = abort.signal;
    let outcome: Outcome = 'failed';
    let failure: Error | null = null;
    try {
      outcome = await this.steps(abort.signal);
    } catch (error) {
      failure = abort.signal.aborted ? (abort.signal.reason as Error) : (error as Error);
      if (failure instanceof PackageInstallError) outcome = 'install-failed';
      else if (!(failure instanceof StatusError) && !(failure instanceof CallCancelledError)) {
        failure = await this.diagnoseLoss(failure);
      } else if (failure instanceof ExecutorLostError && this.container && !this.diagnosed) {
        failure = await this.diagnoseLoss(failure);
      }
    } finally {
      clearTimeout(timer);
      this.stream.off('cancelled', onCancel);
    }
    this.finish(outcome, failure, performance.now() - started);
  }

  private async steps(signal: AbortSignal): Promise<Outcome> {
    await this.obtainImage(signal);
    const connection = await this.acquire(signal);
    this.connection = connection;
    signal.throwIfAborted();
    await this.enter(connection, signal);
    if (this.request.packages.length > 0) await this.install(connection, signal);
    this.started = true;
    await connection.write(
      encodeJsonFrame(FrameType.CALL, {
        format: this.request.format,
        ...(this.request.inputs > 0
          ? { inputs: this.request.inputs, maxInputs: this.request.maxInputs }
          : {}),
        // A pinned call: the executor refuses it unless its container holds exactly this version.
        ...(this.request.version === '' ? {} : { version: this.request.version }),
      }),
    );
    const phase = new AbortController();
    const stop = () => phase.abort(signal.reason);
    signal.addEventListener('abort', stop, { once: true });
    const pumping = this.pump(connection, phase.signal);
    const relaying = this.relay(connection);
    pumping.catch(() => phase.abort());
    relaying.catch(() => phase.abort());
    try {
      await Promise.all([pumping, relaying]);
    } finally {
      signal.removeEventListener('abort', stop);
    }
    return 'answered';
  }

  /** The call's image: held here, or built now (docs/images.md). */
  private async obtainImage(signal: AbortSignal): Promise<void> {
    const { request, deps } = this;
    if (!request.image) return;
    if (request.version !== '') {
      throw new InvalidCallError('a pinned call runs in its version: it cannot name an image');
    }
    const images = deps.images?.() ?? null;
    if (!images) throw new InvalidCallError('this worker keeps no images');
    this.image = await images.obtain(request.tenantId, request.image, signal, (line) =>
      this.sendLog(LogSource.LOG_SOURCE_SYSTEM, line),
    );
  }

  /** A new container's image: its layer, and the snapshot it restores from where it has one. */
  private imageStart(): { layer: ImageLayer | null; start: SnapshotStart | null } {
    const images = this.deps.images?.() ?? null;
    if (!this.image || !images) return { layer: null, start: null };
    const { image } = this.image;
    return {
      layer: { prefix: images.prefixOf(image), wheels: null, writable: false },
      start: images.snapshotStart(image),
    };
  }

  /**
   * A container made for the image enters it (imports its modules); a session's container
   * already did, and keeps the image it entered: another image there is refused.
   */
  private async enter(connection: ExecutorConnection, signal: AbortSignal): Promise<void> {
    const container = this.container!;
    const use = this.image;
    if (!use) {
      if (container.imageId !== null) this.ids.checkpointId = imageName(container.imageId);
      return;
    }
    const { id } = use.image.manifest;
    this.ids.checkpointId = imageName(id);
    if (container.imageId === id) return;
    if (this.request.containerId !== '') {
      throw new InvalidCallError(
        `the session's container runs ${container.imageId === null ? 'no image' : imageName(container.imageId)}, not ${imageName(id)}: a session keeps the image of its first call`,
      );
    }
    const entered = await enterImage(connection, use.image.manifest, signal);
    if (!entered.ok) {
      this.diagnosed = true;
      throw new ExecutorLostError(
        `the container could not enter ${imageName(id)}: ${entered.message}`,
      );
    }
    container.imageId = id;
  }

  /**
   * Steps 2-4: resume the named container or create one (restored from the checkpoint, or cold
   * when that fails), and hold a connection its executor answered on.
   */
  private async acquire(signal: AbortSignal): Promise<ExecutorConnection> {
    const { request, deps } = this;
    if (request.containerId !== '') {
      const container = await deps.pool.resume(
        request.containerId,
        request.memory,
        request.requestId,
        request.sessionId,
      );
      this.adopt(container);
      if (request.version !== '' && container.checkpointId !== request.version) {
        throw new VersionMismatchError(
          `container ${container.id} holds ${container.checkpointId === '' ? 'no version (a cold start)' : `"${container.checkpointId}"`}, not version "${request.version}": refused`,
        );
      }
      return this.reconnect(container, signal);
    }
    if (request.version !== '') return this.acquireVersion(signal);
    const { layer, start } = this.imageStart();
    const created = await deps.pool.create(
      request.memory,
      request.checkpointId,
      signal,
      request.sessionId,
      false,
      layer,
      start,
    );
    this.adopt(created.container);
    if (created.fallback !== null) {
      await this.sendLog(
        LogSource.LOG_SOURCE_SYSTEM,
        `checkpoint ${request.checkpointId} was not restored (${created.fallback}); the container started cold`,
      );
    }
    return created.connection;
  }

  /**
   * A pinned call's container: the version resident first (a cold load when it is not, reported
   * loading, then resident or failed), then a container restored from exactly it, never cold.
   */
  private async acquireVersion(signal: AbortSignal): Promise<ExecutorConnection> {
    const { request, deps } = this;
    const versions = deps.versions?.() ?? null;
    if (!versions) {
      throw new VersionLoadError(
        `version "${request.version}" cannot be loaded: this worker holds no versions`,
      );
    }
    this.releaseVersion = versions.use(request.version);
    const started = performance.now();
    await versions.ensure(request.version);
    signal.throwIfAborted();
    if (request.coldLoad) {
      this.log.info(
        { loadMs: Math.round(performance.now() - started) },
        'version ready for a cold-load call',
      );
    }
    let created;
    try {
      created = await deps.pool.create(
        request.memory,
        request.version,
        signal,
        request.sessionId,
        true,
      );
    } catch (error) {
      signal.throwIfAborted();
      throw new VersionLoadError(
        `version "${request.version}" could not be restored on worker ${deps.workerId}: ${(error as Error).message}`,
      );
    }
    this.adopt(created.container);
    return created.connection;
  }

  private adopt(container: Container): void {
    container.requestId = this.request.requestId;
    container.gpuMemory = this.request.gpuMemory;
    this.container = container;
    this.ids.containerId = container.id;
    this.ids.checkpointId = container.checkpointId;
    this.note(
      `running on worker ${this.deps.workerId} in container ${container.id}` +
        (container.checkpointId === ''
          ? ' (a cold start)'
          : ` (checkpoint ${container.checkpointId})`),
    );
    this.log = this.log.child({ containerId: container.id, checkpointId: container.checkpointId });
  }

  /** Step 3 for a session's container: the connection its last call left open, or a new dial. */
  private async reconnect(container: Container, signal: AbortSignal): Promise<ExecutorConnection> {
    const idle = container.idleConnection;
    container.idleConnection = null;
    if (idle?.usable) return idle;
    idle?.destroy();
    try {
      return await ExecutorConnection.dial(container.paths.socket, {
        timeoutMs: this.deps.dialTimeoutMs,
        signal: AbortSignal.any([signal, container.exitSignal]),
      });
    } catch (error) {
      signal.throwIfAborted();
      if (container.alive) throw error;
      this.diagnosed = true;
      throw new ExecutorLostError(
        `the session's container died before the call: ${await container.exitCause()}`,
      );
    }
  }

  /** Step 5: install the call's packages into the container's prefix, relaying the output. */
  private install(connection: ExecutorConnection, signal: AbortSignal): Promise<void> {
    return installPackages({
      connection,
      packages: this.request.packages,
      installer: this.deps.installer,
      python: this.deps.python,
      source: this.deps.packageSource,
      downloads: this.container!.paths.downloads,
      cacheDir: this.deps.packageCacheDir,
      say: (text) => this.sendLog(INSTALL_LOG_SOURCE, text),
      signal,
    });
  }

  /** Step 6, inbound: the router's payload chunks to the executor, as they arrive. */
  private async pump(connection: ExecutorConnection, signal: AbortSignal): Promise<void> {
    for (;;) {
      let message: ExecuteRequest | null;
      try {
        message = await abortable(this.reader.next(), signal);
      } catch (error) {
        if (signal.aborted || error instanceof StatusError) throw error;
        throw new CallCancelledError(`the router's stream broke: ${(error as Error).message}`);
      }
      if (message === null) break;
      if (message.message?.$case !== 'chunk') {
        throw new InvalidCallError('only payload chunks may follow the CallHeader');
      }
      const { data } = message.message.value;
      if (data.length > MAX_PIECE) {
        throw new InvalidCallError(
          `a payload chunk of ${data.length} bytes exceeds the ${MAX_PIECE}-byte limit`,
        );
      }
      if (data.length > 0) await connection.write(encodeFrame(FrameType.PAYLOAD, data));
    }
    await connection.write(encodeFrame(FrameType.PAYLOAD_END));
  }

  /**
   * Step 6, outbound: the executor's log lines and result pieces to the router; for a batch, its
   * outcome records (checked, and joined into chunks while more wait) and its inputs' lines.
   */
  private async relay(connection: ExecutorConnection): Promise<void> {
    const batch =
      this.request.inputs > 0
        ? new BatchRelay(this.request.inputs, (data) =>
            this.send({ $case: 'chunk', value: { data } }),
          )
        : null;
    for (;;) {
      const frame = await connection.next();
      if (frame === null) {
        throw new ExecutorLostError('the executor closed the connection before it answered');
      }
      if (batch !== null) {
        if (frame.type === FrameType.OUTCOME) {
          await batch.outcome(frame.body, connection.buffered > 0);
          continue;
        }
        await batch.flush();
      }
      switch (frame.type) {
        case FrameType.LOG: {
          const { source, text } = decodeLogBody(frame);
          await this.sendLog(source, text);
          break;
        }
        case FrameType.INPUT_LOG: {
          if (batch === null) throw new FrameProtocolError('an INPUT_LOG frame in a plain call');
          const { input, source, text } = decodeInputLogBody(frame);
          batch.outcomes.checkInput(input, 'an INPUT_LOG frame');
          await this.send({ $case: 'log', value: { source, text, input } });
          break;
        }
        case FrameType.RESULT:
          if (batch !== null) throw new FrameProtocolError('a RESULT frame in a batch');
          for (const data of chunksOf(frame.body, MAX_PIECE)) {
            await this.send({ $case: 'chunk', value: { data } });
          }
          break;
        case FrameType.RESULT_END: {
          const end = readFrameBody(frame, ResultEndSchema);
          batch?.outcomes.checkComplete();
          if (batch !== null) this.inputsRaised = batch.outcomes.raised;
          if (end.raised !== undefined) {
            if (batch !== null || end.ok) {
              throw new FrameProtocolError(
                batch !== null
                  ? 'a RESULT_END of a batch names an exception'
                  : 'a RESULT_END says the function both returned and raised',
              );
            }
            const { traceback, ...raised } = end.raised;
            this.raised = { raised: boundedRaised(raised), traceback };
          }
          this.log.debug({ ok: end.ok, functionMs: end.ms }, 'executor answered');
          return;
        }
        case FrameType.ERROR: {
          const { message, reason } = readFrameBody(frame, ExecutorErrorSchema);
          this.diagnosed = true;
          if (reason === 'version')
            throw new VersionMismatchError(`the executor refused the call: ${message}`);
          throw new ExecutorLostError(`the executor refused the call: ${message}`);
        }
        default:
          throw new ExecutorLostError(
            `the executor sent an unexpected ${frameTypeName(frame.type)}`,
          );
      }
    }
  }

  /** A note of readie's kept with the call's output (not sent: the client has the answer). */
  private note(text: string): void {
    this.kept?.line(LogSource.LOG_SOURCE_SYSTEM, text, this.clock());
  }

  private sendLog(source: LogSource, text: string): Promise<void> {
    // Kept first: what the client may not live to read survives it.
    this.kept?.line(source, text, this.clock());
    return this.send({ $case: 'log', value: { source, text } });
  }

  private async send(message: ExecuteResponse['message']): Promise<void> {
    if (this.stream.cancelled || this.stream.destroyed) {
      throw new CallCancelledError('the router cancelled the call');
    }
    const fits = this.stream.write({ ids: { ...this.ids }, message });
    if (!fits) await once(this.stream, 'drain', { signal: this.signal });
  }

  /**
   * The function raised: its traceback a line each (as the executor bounded it), then a note
   * saying what it raised, kept with the call's output (not sent: the client has the exception).
   */
  private keepTraceback(raised: Raised): void {
    for (const line of this.raised?.traceback.split(/\r?\n/u) ?? []) {
      if (line !== '') this.note(line);
    }
    this.note(`the function ${raisedLine(raised)}`);
  }

  /** The last note of the call's kept output, and its end. */
  private endKept(text: string): void {
    this.note(text);
    this.kept?.end(this.clock());
  }

  /** Turns a dropped executor connection into what happened to the container. */
  private async diagnoseLoss(error: Error): Promise<StatusError> {
    const container = this.container;
    if (!container) {
      return error instanceof StatusError ? error : new ExecutorLostError(error.message);
    }
    if (!(await container.exitsWithin(LOST_DIAGNOSIS_WAIT_MS))) {
      return error instanceof StatusError
        ? error
        : new ExecutorLostError(`the connection to the executor broke: ${error.message}`);
    }
    const exit = await container.exitReport();
    return exit.oomKilled
      ? new OutOfMemoryError(exit.cause, container.memoryLimit)
      : new ExecutorLostError(exit.cause);
  }

  /** Step 7 and the end of the stream: release the container, then answer the status. */
  private finish(outcome: Outcome, failure: Error | null, elapsedMs: number): void {
    this.releaseVersion();
    this.image?.release();
    const keep = outcome !== 'failed' && this.request.sessionId !== '';
    const container = this.container;
    if (container) this.deps.pool.release(container, keep);
    if (outcome === 'answered' && container?.state === 'ready' && this.connection?.usable) {
      // The session's next call reuses this connection: no dial, no HELLO.
      container.idleConnection = this.connection;
    } else if (outcome === 'failed') this.connection?.destroy();
    else this.connection?.close();
    const ms = Math.round(elapsedMs * 1000) / 1000;
    if (failure instanceof CallCancelledError) {
      this.endKept(`call cancelled after ${Math.round(ms)} ms: ${failure.message}`);
      this.log.info({ ms, reason: failure.message }, 'call cancelled');
      return;
    }
    if (failure === null) {
      const raised = this.raised?.raised ?? null;
      if (raised === null) {
        const inputsRaised = this.inputsRaised;
        this.endKept(
          `call answered in ${Math.round(ms)} ms` +
            (inputsRaised ? ` (${inputsRaised} of its ${this.request.inputs} inputs raised)` : ''),
        );
        this.log.info({ ms, kept: keep, inputsRaised: inputsRaised ?? undefined }, 'call answered');
        if (inputsRaised === null) {
          this.stream.end();
          return;
        }
        // The router records how many of the batch's inputs raised (the caller has each one).
        const metadata = new Metadata();
        for (const [name, value] of Object.entries(inputsRaisedTrailers(inputsRaised))) {
          metadata.set(name, value);
        }
        this.stream.end(metadata);
        return;
      }
      this.keepTraceback(raised);
      this.endKept(`call answered in ${Math.round(ms)} ms (the function raised ${raised.type})`);
      this.log.info({ ms, kept: keep, raised: raised.type }, 'call answered: the function raised');
      // The caller gets the exception in the result; the router hears of it in the trailers.
      const metadata = new Metadata();
      for (const [name, value] of Object.entries(raisedTrailers(raised))) metadata.set(name, value);
      this.stream.end(metadata);
      return;
    }
    const error = failure instanceof StatusError ? failure : new ExecutorLostError(failure.message);
    this.endKept(`call failed after ${Math.round(ms)} ms: ${error.code}: ${error.message}`);
    this.log.info({ ms, code: error.code, error: error.message, kept: keep }, 'call failed');
    const metadata = idTrailers(this.ids);
    const trailers =
      error instanceof OutOfMemoryError
        ? outOfMemoryTrailers(error.budget)
        : this.started
          ? NO_TRAILERS
          : NOT_STARTED;
    for (const [name, value] of Object.entries(trailers)) metadata.set(name, value);
    this.stream.emit('error', { code: status[error.code], details: error.message, metadata });
  }
}
