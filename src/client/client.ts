/** The TypeScript client: calls Python functions on a readie cluster with JSON arguments. */
import type { ChannelOptions } from '@grpc/grpc-js';
import { ProxyServiceClient } from '../proto/gen/readie/v1/proxy.js';
import { TenantServiceClient } from '../proto/gen/readie/v1/tenant.js';
import { sizeOf } from './call-config.js';
import {
  runInput,
  runMap,
  SpawnedCall,
  type FanOutDeps,
  type FanOutSlot,
  type MapOptions,
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
import { RemoteCall, type RemoteLogLine } from './remote-call.js';

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

/** Options of a client: where the cluster is, and gRPC channel options. */
export interface ReadieClientOptions extends ConnectionOptions {
  readonly channelOptions?: ChannelOptions;
}

/**
 * A connection to a readie cluster (one gRPC channel, shared by all its calls and sessions).
 *
 * ```ts
 * const readie = new ReadieClient(); // READIE_ADDRESS, READIE_INSECURE, READIE_CA_FILE, READIE_AUTH_TOKEN
 * await readie.call({ module: 'math', function: 'hypot', args: [3, 4] }); // 5
 * ```
 */
export class ReadieClient {
  readonly connection: Connection;
  readonly #client: ProxyServiceClient;
  readonly #tenant: TenantServiceClient;

  /** Throws ConfigurationError when no address is configured or the CA file is unreadable. */
  constructor(options: ReadieClientOptions = {}) {
    this.connection = resolveConnection(options);
    this.#client = new ProxyServiceClient(
      this.connection.address,
      channelCredentials(this.connection),
      options.channelOptions,
    );
    this.#tenant = new TenantServiceClient(
      this.connection.address,
      channelCredentials(this.connection),
      { ...options.channelOptions, channelOverride: this.#client.getChannel() },
    );
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
  ): AsyncGenerator<T | ReadieError, void, undefined> {
    return runMap<T>(this.#fanOut, fn, asArgumentLists(inputs), lengthOf(inputs), options);
  }

  /** {@link map} with each input a list of positional arguments. */
  starmap<T = unknown>(
    fn: MappedFunction,
    inputs: Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]>,
    options: MapOptions = {},
  ): AsyncGenerator<T | ReadieError, void, undefined> {
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
  slots(options: CallDemandOptions = {}): Promise<number> {
    const memory = sizeOf(options.memory, 'memory');
    const gpuMemory = sizeOf(options.gpuMemory, 'gpuMemory') ?? 0;
    return new Promise((resolve, reject) =>
      this.#tenant.slots(
        {
          memory,
          gpuMemory,
          gpu: (options.gpu ?? false) || gpuMemory > 0,
          pinned: options.pinned ?? false,
        },
        callMetadata(this.connection),
        (error, answer) => (error ? reject(this.#error(error)) : resolve(answer.slots)),
      ),
    );
  }

  /** Ends a session on the cluster: its container is destroyed now, its later calls refused. */
  endSession(sessionId: string): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.#tenant.endSession({ sessionId }, callMetadata(this.connection), (error, answer) =>
        error ? reject(this.#error(error)) : resolve(answer.ended),
      ),
    );
  }

  /** Closes the channel; calls in flight are cancelled. */
  close(): void {
    this.#client.close();
  }

  #error(error: { code: number; details?: string }): ReadieError {
    return errorFromStatus(error.code, error.details, { address: this.connection.address });
  }

  readonly #fanOut: FanOutDeps = {
    start: (fn, args, sessionId, options, signal) =>
      this.#start({ ...fn, args }, { ...options, signal }, sessionId, undefined),
    slots: (options) => this.slots(options),
    endSession: (sessionId) => this.endSession(sessionId),
  };

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
      client: this.#client,
      address: this.connection.address,
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
