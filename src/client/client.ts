/** The TypeScript client: calls Python functions on a readie cluster with JSON arguments. */
import type { ChannelOptions, ServiceError } from '@grpc/grpc-js';
import { ProxyServiceClient } from '../proto/gen/readie/v1/proxy.js';
import { TenantServiceClient, type OwnCallLogsResponse } from '../proto/gen/readie/v1/tenant.js';
import type { CallView, OutputLine } from '../proto/gen/readie/v1/history.js';
import type { HeldImageView } from '../proto/gen/readie/v1/images.js';
import { parseDuration } from '../shared/units.js';
import { BoundedMap } from '../shared/bounded-map.js';
import { imageOf, sizeOf, type ImageOptions } from './call-config.js';
import {
  runInput,
  runMap,
  SpawnedCall,
  type FanOutDeps,
  type FanOutSlot,
  type MapOptions,
  type MapRoom,
  type MappedFunction,
} from './fanout.js';
import { errorFromStatus, type ReadieError } from './errors.js';
import { newRequestId, newSessionId, type CallInfo } from './call-info.js';
import { buildCallConfig, type CallDemandOptions } from './call-config.js';
import {
  callMetadata,
  channelCredentials,
  resolveConnection,
  type Connection,
  type ConnectionOptions,
} from './connection.js';
import { decodeJsonEnvelope, encodeJsonCall, type PythonCall } from './json-call.js';
import { encodeJsonBatch, INPUT_TIMES_KEPT, type InputEncodingError } from './batches.js';
import { RemoteCall, type RemoteLogLine } from './remote-call.js';
import { MAX_ROUTER_MOVES, RouterList, unsentRefusal } from './router-list.js';

/** The stubs the client keeps per router address (one channel each). */
interface RouterStubs {
  readonly proxy: ProxyServiceClient;
  readonly tenant: TenantServiceClient;
}

/** Options of one call: what it asks of the cluster, and how the caller follows it. */
export interface CallOptions extends CallDemandOptions {
  /** Aborting it cancels the call on the cluster; the call rejects with CallCancelledError. */
  readonly signal?: AbortSignal;
  /** Called with each log line as it arrives (an exception thrown here cancels the call). */
  readonly onLog?: (line: RemoteLogLine) => void;
  /**
   * How many more times to try a call that was shed (a pinned call whose version is loading:
   * {@link ShedError}), after the cluster's retry-after hint, with `retryOf` set (default 3).
   */
  readonly shedRetries?: number;
  /** Milliseconds the call may take, all its tries included (default: no deadline). */
  readonly timeoutMs?: number;
}

/** Which of the tenant's calls `calls()` lists; every field narrows. */
export interface CallsFilter {
  /** Only calls requested within this long: ms, or a duration with its unit (`'10m'`). */
  readonly since?: number | string;
  /**
   * Only calls that failed, whose function raised (state `raised`), were refused or expired, and
   * batches some of whose inputs raised.
   */
  readonly failed?: boolean;
  /** Only calls of this function (`module.function`). */
  readonly function?: string;
  /** At most this many, newest first (default 100, at most 1000). */
  readonly limit?: number;
}

/** How `logs()` reads a call's output. */
export interface LogsOptions {
  /** Wait for new lines until the call ends (default: what is kept now). */
  readonly follow?: boolean;
  /** Called with each line as it arrives. */
  readonly onLine?: (line: OutputLine) => void;
  /** Aborting it stops reading (the lines so far are returned). */
  readonly signal?: AbortSignal;
}

/** A call's output as its worker kept it. */
export interface CallOutput {
  readonly lines: OutputLine[];
  /** The worker kept no more of it (OUTPUT_MAX_CALL_BYTES). */
  readonly truncated: boolean;
}

/** Options of a client: where the cluster is, and gRPC channel options. */
export interface ReadieClientOptions extends ConnectionOptions {
  readonly channelOptions?: ChannelOptions;
}

/**
 * A connection to a readie cluster (one gRPC channel per router address, shared by all its calls
 * and sessions; with several, a standby's refusal moves a call to the leader).
 *
 * ```ts
 * const readie = new ReadieClient(); // READIE_ADDRESS (one address or a,b), READIE_INSECURE, READIE_CA_FILE, READIE_AUTH_TOKEN
 * await readie.call({ module: 'math', function: 'hypot', args: [3, 4] }); // 5
 * ```
 */
export class ReadieClient {
  readonly connection: Connection;
  readonly #routers: RouterList<RouterStubs>;

  /** Throws ConfigurationError when no address is configured or the CA file is unreadable. */
  constructor(options: ReadieClientOptions = {}) {
    const connection = resolveConnection(options);
    this.connection = connection;
    this.#routers = new RouterList(connection.addresses, (address) => {
      const proxy = new ProxyServiceClient(
        address,
        channelCredentials(connection),
        options.channelOptions,
      );
      const tenant = new TenantServiceClient(address, channelCredentials(connection), {
        ...options.channelOptions,
        channelOverride: proxy.getChannel(),
      });
      return { proxy, tenant };
    });
  }

  /** Runs a Python function and resolves with its JSON result; rejects with a ReadieError. */
  async call<T = unknown>(call: PythonCall, options: CallOptions = {}): Promise<T> {
    return this.start<T>(call, options).result;
  }

  /** Starts a call and returns it at once: its live logs, its IDs, `cancel()` and `result`. Throws TypeError or RangeError for a malformed call or options. */
  start<T = unknown>(call: PythonCall, options: CallOptions = {}): RemoteCall<T> {
    return this.#start<T>(call, options, '', undefined);
  }

  /** A session: its calls run one after another in one container, sharing its Python state. */
  session(sessionId: string = newSessionId()): Session {
    return new Session(
      sessionId,
      (call, options, onSettled) => this.#start(call, options, sessionId, onSettled),
      () => this.endSession(sessionId),
    );
  }

  /**
   * Calls `fn` once per input (each input is one argument) across the cluster and yields the
   * results, in input order unless `orderOutputs: false`; see {@link MapOptions} and
   * docs/clients.md. Inputs (an iterable or async iterable) are drawn lazily.
   */
  map<T = unknown>(
    fn: MappedFunction,
    inputs: Iterable<unknown> | AsyncIterable<unknown>,
    options: MapOptions = {},
  ): AsyncGenerator<T | ReadieError | InputEncodingError, void, undefined> {
    return runMap<T>(this.#fanOut, fn, asArgumentLists(inputs), lengthOf(inputs), options);
  }

  /** {@link map} with each input a list of positional arguments. */
  starmap<T = unknown>(
    fn: MappedFunction,
    inputs: Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]>,
    options: MapOptions = {},
  ): AsyncGenerator<T | ReadieError | InputEncodingError, void, undefined> {
    return runMap<T>(this.#fanOut, fn, inputs, lengthOf(inputs), options);
  }

  /**
   * Starts `call` in the background and returns its handle at once (`get`, `cancel`, `done`);
   * unlike {@link start}, refusals for lack of room are waited out. Gather many with
   * `Promise.all(calls.map((c) => c.get()))`.
   */
  spawn<T = unknown>(call: PythonCall, options: MapOptions = {}): SpawnedCall<T> {
    const { args = [], ...fn } = call;
    return new SpawnedCall<T>((signal) =>
      runInput<T>(this.#fanOut, fn, args, undefined, spawnSlot(), options, signal),
    );
  }

  /**
   * How many more calls of this budget the cluster would place now for this client's tenant (with
   * `pinned`, on its pinned version's subset only).
   */
  async slots(options: CallDemandOptions = {}): Promise<number> {
    return (await this.#room(options)).slots;
  }

  /** What a map of this budget may use now (`MapRoom`: the free slots, the queue beside them). */
  #room(options: CallDemandOptions): Promise<MapRoom> {
    const memory = sizeOf(options.memory, 'memory');
    const gpuMemory = sizeOf(options.gpuMemory, 'gpuMemory') ?? 0;
    const request = {
      memory,
      gpuMemory,
      gpu: (options.gpu ?? false) || gpuMemory > 0,
      pinned: options.pinned ?? false,
    };
    return this.#tenantCall<MapRoom>((tenant, done) =>
      tenant.slots(request, callMetadata(this.connection), (error, answer) =>
        done(
          error,
          answer === undefined
            ? undefined
            : {
                slots: answer.slots,
                queued: answer.queueTimeoutMs > 0 ? answer.maxQueued : 0,
                othersWaiting: answer.othersWaiting,
              },
        ),
      ),
    );
  }

  /** Ends a session on the cluster: its container is destroyed now, its later calls refused. */
  endSession(sessionId: string): Promise<boolean> {
    return this.#tenantCall<boolean>((tenant, done) =>
      tenant.endSession({ sessionId }, callMetadata(this.connection), (error, answer) =>
        done(error, answer?.ended),
      ),
    );
  }

  /** This tenant's recent calls, newest first, from the router's call history (docs/calls.md). */
  calls(filter: CallsFilter = {}): Promise<CallView[]> {
    const since = filter.since ?? 0;
    const request = {
      filter: {
        sinceMs: typeof since === 'string' ? parseDuration(since) : since,
        failed: filter.failed ?? false,
        function: filter.function ?? '',
        limit: filter.limit ?? 0,
      },
    };
    return this.#tenantCall<CallView[]>((tenant, done) =>
      tenant.ownCalls(request, callMetadata(this.connection), (error, answer) =>
        done(error, answer?.calls),
      ),
    );
  }

  /** One of this tenant's calls; rejects with NOT_FOUND when the history holds none by that ID. */
  describeCall(requestId: string): Promise<CallView> {
    return this.#tenantCall<CallView>((tenant, done) =>
      tenant.ownCall({ requestId }, callMetadata(this.connection), (error, answer) =>
        done(error, answer?.call),
      ),
    );
  }

  /**
   * One of this tenant's calls' output (stdout, stderr, readie's notes), fetched through the
   * router from the worker that ran it. NOT_FOUND names why when there is none.
   */
  logs(requestId: string, options: LogsOptions = {}): Promise<CallOutput> {
    const lines: OutputLine[] = [];
    let truncated = false;
    return this.#tenantCall<CallOutput>((tenant, done) => {
      const stream = tenant.ownCallLogs(
        { requestId, follow: options.follow ?? false },
        callMetadata(this.connection),
      );
      const abort = () => stream.cancel();
      options.signal?.addEventListener('abort', abort, { once: true });
      stream.on('data', (message: OwnCallLogsResponse) => {
        truncated ||= message.truncated;
        for (const line of message.lines) {
          lines.push(line);
          options.onLine?.(line);
        }
      });
      stream.on('end', () => {
        options.signal?.removeEventListener('abort', abort);
        done(null, { lines, truncated });
      });
      stream.on('error', (error: ServiceError) => {
        options.signal?.removeEventListener('abort', abort);
        if (options.signal?.aborted) done(null, { lines, truncated });
        else done(error, undefined);
      });
    });
  }

  /**
   * Where this tenant's images are built (docs/images.md): one entry per worker that is up and
   * holds one, with its size and last use; with `image`, only what that declaration resolved to
   * (none before a call has built it). Never another tenant's image.
   */
  imageStatus(image?: ImageOptions): Promise<HeldImageView[]> {
    const request = { image: imageOf(image) };
    return this.#tenantCall<HeldImageView[]>((tenant, done) =>
      tenant.ownImages(request, callMetadata(this.connection), (error, answer) =>
        done(error, answer?.images),
      ),
    );
  }

  /** Closes the channels; calls in flight are cancelled. */
  close(): void {
    for (const stubs of this.#routers.made) stubs.proxy.close();
  }

  /** A `TenantService` call at the preferred router, moving along the list as calls do. */
  async #tenantCall<T>(
    send: (
      tenant: TenantServiceClient,
      done: (error: ServiceError | null, value: T | undefined) => void,
    ) => void,
  ): Promise<T> {
    let router = this.#routers.current;
    const unreachable = new Set<string>();
    for (let moves = 0; ; moves += 1) {
      try {
        return await new Promise<T>((resolve, reject) =>
          send(router.stubs.tenant, (error, value) =>
            error
              ? reject(
                  errorFromStatus(error.code, error.details, {
                    ...this.#context(router, error),
                    lookup: true,
                  }),
                )
              : resolve(value as T),
          ),
        );
      } catch (error) {
        const refusal = unsentRefusal(error);
        if (refusal === 'unreachable') unreachable.add(router.address);
        const addresses = this.#routers.addresses.length;
        if (refusal === undefined || moves >= MAX_ROUTER_MOVES || unreachable.size >= addresses)
          throw error;
        await new Promise((resolve) => setTimeout(resolve, this.#routers.waitBefore(moves)));
        router = this.#routers.moveFrom(router.address, (error as ReadieError).leader);
      }
    }
  }

  #context(router: { address: string }, error: ServiceError) {
    const trailers: Record<string, string> = {};
    for (const [name, value] of Object.entries(error.metadata?.getMap() ?? {})) {
      if (name.startsWith('readie-')) trailers[name] = String(value);
    }
    return { address: router.address, trailers };
  }

  readonly #fanOut: FanOutDeps = {
    start: (fn, args, sessionId, options, signal) =>
      this.#start({ ...fn, args }, { ...options, signal }, sessionId, undefined),
    room: (options) => this.#room(options),
    endSession: (sessionId) => this.endSession(sessionId),
    startBatch: (fn, inputs, sessionId, options, signal, onChunk, onQueue) =>
      this.#startBatch(fn, inputs, sessionId, { ...options, signal }, onChunk, onQueue),
    inputTimes: new BoundedMap(INPUT_TIMES_KEPT),
  };

  /** One batch of a map: `fn` over `inputs`, its outcomes handed to `onChunk` as they come. */
  #startBatch(
    fn: MappedFunction,
    inputs: readonly string[],
    sessionId: string,
    options: MapOptions,
    onChunk: (data: Buffer, call: CallInfo) => void,
    onQueue?: (queued: boolean) => void,
  ): RemoteCall<unknown> {
    const config = {
      ...buildCallConfig(newRequestId(), sessionId, fn, options),
      inputs: inputs.length,
      ...((options.maxInputs ?? 1) > 1 ? { maxInputs: options.maxInputs } : {}),
    };
    const { timeoutMs, shedRetries } = options as CallOptions;
    const parallel = Math.max(1, options.maxInputs ?? 1);
    return new RemoteCall<unknown>({
      routers: this.#routers,
      insecure: this.connection.insecure,
      metadata: callMetadata(this.connection),
      config,
      payload: encodeJsonBatch(fn, inputs),
      decode: () => undefined,
      onChunk,
      onQueue,
      signal: options.signal,
      onLog: options.onLog,
      shedRetries: shedRetries ?? 3,
      deadline:
        timeoutMs === undefined
          ? undefined
          : Date.now() + timeoutMs * Math.ceil(inputs.length / parallel),
    });
  }

  #start<T>(
    call: PythonCall,
    options: CallOptions,
    sessionId: string,
    onSettled: ((info: CallInfo) => void) | undefined,
  ): RemoteCall<T> {
    const config = buildCallConfig(newRequestId(), sessionId, call, options);
    const shedRetries = options.shedRetries ?? 3;
    if (!Number.isSafeInteger(shedRetries) || shedRetries < 0) {
      throw new RangeError(`shedRetries must be a whole number >= 0, not ${shedRetries}`);
    }
    const { timeoutMs } = options;
    if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs <= 0)) {
      throw new RangeError(`timeoutMs must be a number of milliseconds > 0, not ${timeoutMs}`);
    }
    return new RemoteCall<T>({
      routers: this.#routers,
      insecure: this.connection.insecure,
      metadata: callMetadata(this.connection),
      config,
      payload: encodeJsonCall(call),
      decode: decodeJsonEnvelope,
      signal: options.signal,
      onLog: options.onLog,
      onSettled,
      shedRetries,
      deadline: timeoutMs === undefined ? undefined : Date.now() + timeoutMs,
    });
  }
}

type StartInSession = <T>(
  call: PythonCall,
  options: CallOptions,
  onSettled: (info: CallInfo) => void,
) => RemoteCall<T>;

/**
 * Calls that share one container: the router pins the session's container on its first call and
 * runs its calls one at a time. `close()` ends it on the cluster (its container is destroyed at
 * once, later calls reject with SessionExpiredError); one never closed is reaped once its
 * container idled for the cluster's EXECUTOR_TTL.
 */
export class Session {
  readonly id: string;
  #lastCall: CallInfo | undefined;
  readonly #start: StartInSession;
  readonly #end: () => Promise<boolean>;

  /** Made by {@link ReadieClient.session}. */
  constructor(
    id: string,
    start: StartInSession,
    end: () => Promise<boolean> = () => Promise.resolve(false),
  ) {
    this.id = id;
    this.#start = start;
    this.#end = end;
  }

  /** Ends the session on the cluster; true when this ended it (false: ended already or unknown). */
  close(): Promise<boolean> {
    return this.#end();
  }

  /** Where the session's most recently settled call ran. */
  get lastCall(): CallInfo | undefined {
    return this.#lastCall;
  }

  /** Runs a Python function in the session; see {@link ReadieClient.call}. */
  async call<T = unknown>(call: PythonCall, options: CallOptions = {}): Promise<T> {
    return this.start<T>(call, options).result;
  }

  /** Starts a call in the session; see {@link ReadieClient.start}. */
  start<T = unknown>(call: PythonCall, options: CallOptions = {}): RemoteCall<T> {
    return this.#start<T>(call, options, (info) => (this.#lastCall = info));
  }
}

function spawnSlot(): FanOutSlot {
  return { sessionId: '', renewable: false, used: [], idleSince: 0 };
}

function lengthOf(inputs: unknown): number | undefined {
  return Array.isArray(inputs) ? inputs.length : undefined;
}

function asArgumentLists(
  inputs: Iterable<unknown> | AsyncIterable<unknown>,
): Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]> {
  if (Symbol.asyncIterator in inputs) {
    return (async function* () {
      for await (const input of inputs) yield [input];
    })();
  }
  return (function* () {
    for (const input of inputs) yield [input];
  })();
}
