/**
 * One call on the wire: the config alone, then the payload in chunks of at most 1 MiB, then a
 * half-close; answers fold into live log lines, the IDs of where the call ran, and the result. A
 * pinned call that is shed (RESOURCE_EXHAUSTED with a retry-after hint) is tried again after the
 * hint with a new request ID and `retryOf` naming the first try, so it keeps its version; up to
 * `shedRetries` more tries, never past the deadline. A call refused before it was sent (a standby
 * router's refusal, a router that cannot be reached) moves along the client's router list
 * (`router-list.ts`) with the same request ID, since nothing of it ran.
 */
import { once } from 'node:events';
import { inspect } from 'node:util';
import {
  Metadata as GrpcMetadata,
  status as Status,
  type ClientDuplexStream,
  type Metadata,
} from '@grpc/grpc-js';
import { AMBIGUOUS } from './error-hints.js';
import { speaksTls } from '../net/tls-probe.js';
import type { CallTrailers } from '../shared/call-trailers.js';
import { transportProblemOf } from '../shared/transport-problem.js';
import { LogSource, type LogLine } from '../proto/gen/readie/v1/call.js';
import type {
  CallConfig,
  ProxyServiceClient,
  RequestExecutionRequest,
  RequestExecutionResponse,
} from '../proto/gen/readie/v1/proxy.js';
import {
  initialCallInfo,
  newRequestId,
  updateCallInfo,
  withTrailers,
  type CallInfo,
} from './call-info.js';
import { retryAfterMsOf } from './retry-hint.js';
import { MAX_ROUTER_MOVES, MOVE_MARGIN_MS, unsentRefusal, type RouterList } from './router-list.js';
import { chunksOf } from '../shared/chunks.js';
import {
  CallCancelledError,
  errorFromStatus,
  ProtocolError,
  ReadieError,
  RETRY_AFTER_TRAILER,
  RemoteTimeoutError,
  ShedError,
} from './errors.js';

/** Where a log line came from: the function's stdout or stderr, or readie itself. */
export type LogLineSource = 'stdout' | 'stderr' | 'system';

/** A line of output a call streamed while it ran. */
export interface RemoteLogLine {
  readonly source: LogLineSource;
  /** The text, without its line ending. */
  readonly text: string;
  /** Where the call ran, as this answer named it. */
  readonly call: CallInfo;
  /** In a map's batch: the index (in the batch) of the input that wrote the line. */
  readonly input?: number;
}

function sourceOf(line: LogLine): LogLineSource {
  switch (line.source) {
    case LogSource.LOG_SOURCE_STDERR:
      return 'stderr';
    case LogSource.LOG_SOURCE_SYSTEM:
      return 'system';
    case LogSource.LOG_SOURCE_STDOUT:
    case LogSource.LOG_SOURCE_UNSPECIFIED:
      return 'stdout';
  }
}

/** Everything a call needs to start. */
export interface RemoteCallStart {
  /** The routers to call, and the one to start at. */
  readonly routers: RouterList<{ readonly proxy: ProxyServiceClient }>;
  /** Whether the channel speaks plaintext (for the hint of a failed connection). */
  readonly insecure?: boolean;
  readonly metadata: Metadata;
  readonly config: CallConfig;
  readonly payload: Buffer;
  readonly decode: (payload: Buffer, call: CallInfo) => unknown;
  /**
   * A batch's result chunks, each as it arrives (whole outcome records): given, the call keeps no
   * result and resolves with what `decode` makes of nothing once it ends well.
   */
  readonly onChunk?: ((data: Buffer, call: CallInfo) => void) | undefined;
  /** The call was queued in the router's admission queue (true), or admitted from it (false). */
  readonly onQueue?: ((queued: boolean) => void) | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly onLog?: ((line: RemoteLogLine) => void) | undefined;
  readonly onSettled?: ((call: CallInfo) => void) | undefined;
  /** More tries after a shed, at most (default 0). */
  readonly shedRetries?: number | undefined;
  /** When every try must be over, epoch ms (default: no deadline). */
  readonly deadline?: number | undefined;
}

type Stream = ClientDuplexStream<RequestExecutionRequest, RequestExecutionResponse>;

/**
 * A call in flight. `result` settles with the value or a {@link ReadieError}; `logs()` (or
 * `for await` on the call itself) yields its log lines live, from the first, and ends when the
 * call does; `cancel()` or the AbortSignal cancels it on the cluster.
 */
export class RemoteCall<T = unknown> implements AsyncIterable<RemoteLogLine> {
  readonly requestId: string;
  readonly sessionId: string;
  /** The value, or the error the call failed with. */
  readonly result: Promise<T>;
  #info: CallInfo;
  readonly #lines: RemoteLogLine[] = [];
  #ended = false;
  #wake: (() => void)[] = [];
  #cancelReason: unknown = undefined;
  #cancelled = false;
  #stream: Stream | undefined;

  constructor(start: RemoteCallStart) {
    this.requestId = start.config.requestId;
    this.sessionId = start.config.sessionId;
    this.#info = initialCallInfo(this.requestId, this.sessionId, start.config.retryOf);
    this.result = this.#run(start);
    // A caller that only reads the logs must not crash the process with an unhandled rejection;
    // whoever awaits `result` still gets the error.
    this.result.catch(() => undefined);
  }

  /** Where the call ran, as far as its answers said so far. */
  get info(): CallInfo {
    return this.#info;
  }

  /** Cancels the call on the cluster; `result` rejects with CallCancelledError (its cause: `reason`). */
  cancel(reason?: unknown): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#cancelReason = reason;
    this.#stream?.cancel();
  }

  /** The call's log lines, live: every line from the first, ending when the call ends. */
  async *logs(): AsyncIterableIterator<RemoteLogLine> {
    let next = 0;
    for (;;) {
      const line = this.#lines[next];
      if (line !== undefined) {
        next += 1;
        yield line;
      } else if (this.#ended) {
        return;
      } else {
        await new Promise<void>((resolve) => this.#wake.push(resolve));
      }
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<RemoteLogLine> {
    return this.logs();
  }

  async #run(start: RemoteCallStart): Promise<T> {
    const { signal } = start;
    const onAbort = (): void => this.cancel(signal?.reason);
    try {
      if (signal?.aborted) this.cancel(signal.reason);
      if (this.#cancelled) throw this.#cancelledError(undefined);
      signal?.addEventListener('abort', onAbort, { once: true });
      let config = start.config;
      let router = start.routers.current;
      let moves = 0;
      const unreachable = new Set<string>();
      for (let tries = 1; ; tries += 1) {
        try {
          return await this.#attempt(start, config, router.stubs.proxy, router.address);
        } catch (error) {
          const refusal = unsentRefusal(error);
          if (refusal === 'unreachable') unreachable.add(router.address);
          const moving =
            refusal !== undefined &&
            !this.#cancelled &&
            moves < MAX_ROUTER_MOVES &&
            unreachable.size < start.routers.addresses.length;
          if (moving) {
            const wait = start.routers.waitBefore(moves);
            if (Date.now() + wait + MOVE_MARGIN_MS < (start.deadline ?? Infinity)) {
              moves += 1;
              tries -= 1;
              await new Promise((resolve) => setTimeout(resolve, wait));
              if (this.#cancelled) throw this.#cancelledError(undefined);
              router = start.routers.moveFrom(router.address, (error as ReadieError).leader);
              this.#info = initialCallInfo(config.requestId, config.sessionId, config.retryOf);
              continue;
            }
          }
          if (!(error instanceof ShedError) || this.#cancelled) throw error;
          const deadline = start.deadline ?? Infinity;
          if (tries > (start.shedRetries ?? 0) || Date.now() + error.retryAfterMs >= deadline) {
            throw error;
          }
          await new Promise((resolve) => setTimeout(resolve, error.retryAfterMs));
          if (this.#cancelled) throw this.#cancelledError(undefined);
          // Every try names the first: the log holds its resolution for all of them.
          const retryOf = start.config.requestId;
          config = { ...start.config, requestId: newRequestId(), retryOf };
          this.#info = initialCallInfo(config.requestId, config.sessionId, retryOf);
        }
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#ended = true;
      for (const wake of this.#wake.splice(0)) wake();
      start.onSettled?.(this.#info);
    }
  }

  /** One try of the call, at the router `address`. */
  async #attempt(
    start: RemoteCallStart,
    config: CallConfig,
    client: ProxyServiceClient,
    address: string,
  ): Promise<T> {
    {
      const deadline = start.deadline;
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new RemoteTimeoutError("the call's timeout passed before it could be tried", {
          code: Status.DEADLINE_EXCEEDED,
          call: this.#info,
        });
      }
      const stream = client.requestExecution(
        start.metadata,
        deadline === undefined ? {} : { deadline },
      );
      this.#stream = stream;
      const chunks: Buffer[] = [];
      let hasResult = false;
      // Writes and reads run together: answers (installer output, say) may come before the end of
      // a large payload, and a stalled reader must not stall the writer.
      const stopWriting = new AbortController();
      const writing = writeRequest(stream, config, start.payload, stopWriting.signal);
      try {
        // Without destroyOnReturn: false the iterator would destroy (cancel) the call at its end.
        const answers = stream.iterator({
          destroyOnReturn: false,
        }) as AsyncIterable<RequestExecutionResponse>;
        for await (const answer of answers) {
          this.#info = updateCallInfo(this.#info, answer.ids);
          const message = answer.message;
          if (message?.$case === 'chunk') {
            hasResult = true;
            if (start.onChunk === undefined) chunks.push(message.value.data);
            else start.onChunk(Buffer.from(message.value.data), this.#info);
          } else if (message?.$case === 'queue') {
            start.onQueue?.(message.value.queued);
          } else if (message?.$case === 'log') {
            this.#log(
              {
                source: sourceOf(message.value),
                text: message.value.text,
                call: this.#info,
                ...(message.value.input === undefined ? {} : { input: message.value.input }),
              },
              start,
            );
          }
        }
      } catch (error) {
        throw await this.#mapStreamError(error, start, address);
      } finally {
        // The server may end the call before it read everything; stop waiting for room then.
        stopWriting.abort();
        await writing;
      }
      if (!hasResult) {
        throw new ProtocolError('the cluster ended the call without a result', {
          call: this.#info,
        });
      }
      return start.decode(Buffer.concat(chunks), this.#info) as T;
    }
  }

  #log(line: RemoteLogLine, start: RemoteCallStart): void {
    this.#lines.push(line);
    for (const wake of this.#wake.splice(0)) wake();
    if (start.onLog !== undefined) {
      try {
        start.onLog(line);
      } catch (error) {
        // A failing log callback fails the call, as it would fail a local one.
        this.cancel(error);
      }
    }
  }

  #cancelledError(details: string | undefined): ReadieError {
    const reason = this.#cancelReason;
    return new CallCancelledError(`the call was cancelled by the client${reasonText(reason)}`, {
      code: Status.CANCELLED,
      details,
      call: this.#info,
      cause: reason,
    });
  }

  async #mapStreamError(
    error: unknown,
    start: RemoteCallStart,
    address: string,
  ): Promise<ReadieError> {
    const code = statusCodeOf(error);
    const details = detailsOf(error);
    const trailers = metadataOf(error);
    this.#info = withTrailers(this.#info, trailers);
    if (this.#cancelled && (code === undefined || code === Status.CANCELLED)) {
      return this.#cancelledError(details);
    }
    if (code === undefined) {
      return new ReadieError(`the call failed: ${String(error)}`, {
        call: this.#info,
        cause: error,
      });
    }
    const insecure = start.insecure ?? false;
    const retryAfterMs = retryAfterMsOf(trailers);
    // A plaintext dial of a TLS port fails without saying why: ask the port whether it speaks TLS.
    const problem = code === Status.UNAVAILABLE ? transportProblemOf(details ?? '') : null;
    const ambiguous = insecure && problem !== null && AMBIGUOUS.has(problem);
    return errorFromStatus(code, details, {
      address,
      call: this.#info,
      cause: error,
      trailers: readieTrailersOf(trailers),
      insecure,
      speaksTls: ambiguous ? await speaksTls(address) : false,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    });
  }
}

function metadataOf(error: unknown): Metadata | undefined {
  if (typeof error !== 'object' || error === null || !('metadata' in error)) return undefined;
  const { metadata } = error;
  return metadata instanceof GrpcMetadata ? metadata : undefined;
}

function reasonText(reason: unknown): string {
  if (reason === undefined) return '';
  return `: ${reason instanceof Error ? reason.message : inspect(reason)}`;
}

function statusCodeOf(error: unknown): Status | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  const { code } = error;
  return typeof code === 'number' && Status[code] !== undefined ? code : undefined;
}

/** The `readie-*` trailers of a failed call (src/shared/call-trailers.ts). */
function readieTrailersOf(metadata: Metadata | undefined): CallTrailers {
  if (metadata === undefined) return {};
  const trailers: Record<string, string> = {};
  for (const [name, value] of Object.entries(metadata.getMap())) {
    if (name.startsWith('readie-') || name === RETRY_AFTER_TRAILER) trailers[name] = String(value);
  }
  return trailers;
}

function detailsOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('details' in error)) return undefined;
  return typeof error.details === 'string' ? error.details : undefined;
}

/**
 * The client's side of the stream: the config alone, then chunks, then a half-close, waiting for
 * room whenever the stream asks. Never throws: a broken stream shows on the reading side.
 */
async function writeRequest(
  stream: Stream,
  config: CallConfig,
  payload: Buffer,
  stop: AbortSignal,
): Promise<void> {
  const write = async (message: RequestExecutionRequest): Promise<void> => {
    if (!stream.write(message)) await once(stream, 'drain', { signal: stop });
  };
  try {
    await write({ message: { $case: 'config', value: config } });
    for (const data of chunksOf(payload)) {
      if (stop.aborted || stream.destroyed) return;
      await write({ message: { $case: 'chunk', value: { data } } });
    }
    stream.end();
  } catch {
    // Cancelled, failed, or ended by the server: the reader reports why.
  }
}
