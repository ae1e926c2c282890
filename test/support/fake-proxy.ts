/**
 * A real @grpc/grpc-js server on loopback implementing readie.v1.ProxyService, scripted by each
 * test: it records what the client sent and answers as the script says.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  Server,
  ServerCredentials,
  Metadata,
  status as Status,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { LogSource, type CallIds } from '../../src/proto/gen/readie/v1/call.js';
import {
  ProxyServiceService,
  type CallConfig,
  type RequestExecutionRequest,
  type RequestExecutionResponse,
} from '../../src/proto/gen/readie/v1/proxy.js';
import {
  TenantServiceService,
  type SlotsRequest,
  type SlotsResponse,
} from '../../src/proto/gen/readie/v1/tenant.js';

const MiB = 1024 * 1024;

/** The test CA (see tls/README.md): trust it to reach a FakeProxy started with `tls: true`. */
export const TEST_CA_FILE = fileURLToPath(new URL('tls/ca.pem', import.meta.url));

type Stream = ServerDuplexStream<RequestExecutionRequest, RequestExecutionResponse>;

/** One call as the server saw it, and the means to answer it. */
export class ScriptedCall {
  readonly metadata: Metadata;
  /** `config` or `chunk`, in arrival order. */
  readonly kinds: string[] = [];
  readonly chunkSizes: number[] = [];
  config: CallConfig | undefined;
  payload = Buffer.alloc(0);
  halfClosed = false;
  /** Resolves when the client cancels the call. */
  readonly cancelled: Promise<void>;
  /** Resolves when the config has arrived. */
  readonly started: Promise<void>;
  #markStarted: () => void = () => undefined;
  readonly #stream: Stream;

  constructor(stream: Stream) {
    this.#stream = stream;
    this.metadata = stream.metadata;
    this.cancelled = new Promise((resolve) => stream.on('cancelled', () => resolve()));
    this.started = new Promise((resolve) => (this.#markStarted = resolve));
  }

  /** Reads the client's stream up to its half-close. */
  async read(): Promise<void> {
    const parts: Buffer[] = [];
    // destroyOnReturn: false, or the iterator destroys the stream (cancelling the call) at its end.
    const requests = this.#stream.iterator({
      destroyOnReturn: false,
    }) as AsyncIterable<RequestExecutionRequest>;
    for await (const request of requests) {
      const message = request.message;
      this.kinds.push(message?.$case ?? 'empty');
      if (message?.$case === 'config') {
        this.config = message.value;
        this.#markStarted();
      } else if (message?.$case === 'chunk') {
        this.chunkSizes.push(message.value.data.length);
        parts.push(message.value.data);
      }
    }
    this.payload = Buffer.concat(parts);
    this.halfClosed = true;
  }

  /** The request payload as JSON. */
  request(): {
    module: unknown;
    source: unknown;
    function: unknown;
    args: unknown;
    kwargs: unknown;
  } {
    return JSON.parse(this.payload.toString('utf8')) as ReturnType<ScriptedCall['request']>;
  }

  /** The IDs answers repeat: this call's, on worker-1 / container-1 from ckpt-numpy. */
  ids(overrides: Partial<CallIds> = {}): CallIds {
    return {
      requestId: this.config?.requestId ?? '',
      sessionId: this.config?.sessionId ?? '',
      workerId: 'worker-1',
      containerId: 'container-1',
      checkpointId: 'ckpt-numpy',
      version: '',
      routingRevision: 0,
      ...overrides,
    };
  }

  log(source: LogSource, text: string): void {
    this.#stream.write({ ids: this.ids(), message: { $case: 'log', value: { source, text } } });
  }

  /** Sends an envelope in chunks of at most 1 MiB (with `ids` over the defaults) and ends OK. */
  result(envelope: unknown, ids: Partial<CallIds> = {}): void {
    const payload = Buffer.from(JSON.stringify(envelope), 'utf8');
    for (let start = 0; start < Math.max(payload.length, 1); start += MiB) {
      const data = payload.subarray(start, start + MiB);
      this.#stream.write({ ids: this.ids(ids), message: { $case: 'chunk', value: { data } } });
    }
    this.#stream.end();
  }

  /** Sends one result chunk as it is (a batch's outcome records, say). */
  chunk(data: Buffer): void {
    this.#stream.write({ ids: this.ids(), message: { $case: 'chunk', value: { data } } });
  }

  /** Sends a log line of input `input` of a batch. */
  inputLog(input: number, source: LogSource, text: string): void {
    this.#stream.write({
      ids: this.ids(),
      message: { $case: 'log', value: { source, text, input } },
    });
  }

  /** Ends the call OK without a result. */
  end(): void {
    this.#stream.end();
  }

  /** Ends the call with a status and trailers (e.g. `readie-not-started`), or trailing metadata. */
  fail(
    code: Status,
    details: string,
    trailers: Readonly<Record<string, string>> | Metadata = {},
  ): void {
    let metadata: Metadata;
    if (trailers instanceof Metadata) metadata = trailers;
    else {
      metadata = new Metadata();
      for (const [name, value] of Object.entries(trailers)) metadata.set(name, value);
    }
    this.#stream.emit('error', { code, details, metadata });
  }
}

/** A test's script for each call. */
export type Script = (call: ScriptedCall) => Promise<void>;

/** Echoes the request back as the value: `{ ok: true, value: <request JSON> }`. */
export const echoRequest: Script = async (call) => {
  await call.read();
  call.result({ ok: true, value: call.request() });
};

/** The server: `script` answers each call; `calls` records them. */
export class FakeProxy {
  script: Script = echoRequest;
  readonly calls: ScriptedCall[] = [];
  readonly failures: unknown[] = [];
  /**
   * `TenantService.Slots`'s answers in turn (the last repeats); empty: the service answers
   * UNIMPLEMENTED, as a router that cannot say.
   */
  rooms: Partial<SlotsResponse>[] = [];
  #roomsAsked = 0;
  readonly #server = new Server();
  address = '';

  private constructor() {
    this.#server.addService(ProxyServiceService, {
      requestExecution: (stream: Stream) => {
        const call = new ScriptedCall(stream);
        this.calls.push(call);
        this.script(call).catch((error: unknown) => {
          this.failures.push(error);
          call.fail(Status.INTERNAL, `the test script failed: ${String(error)}`);
        });
      },
    });
    this.#server.addService(TenantServiceService, {
      slots: (
        _call: ServerUnaryCall<SlotsRequest, SlotsResponse>,
        callback: sendUnaryData<SlotsResponse>,
      ) => {
        const room = this.rooms[Math.min(this.#roomsAsked, this.rooms.length - 1)];
        this.#roomsAsked += 1;
        if (room === undefined) {
          callback({ code: Status.UNIMPLEMENTED, details: 'no rooms scripted' });
          return;
        }
        callback(null, {
          tenantId: '',
          slots: 0,
          memory: 0,
          workers: 1,
          queueTimeoutMs: 0,
          maxQueued: 0,
          othersWaiting: false,
          ...room,
        });
      },
    });
  }

  /** Scripts `Slots`'s answers from now on (see `rooms`). */
  answerRooms(...rooms: Partial<SlotsResponse>[]): void {
    this.rooms = rooms;
    this.#roomsAsked = 0;
  }

  /** Starts a server on a free loopback port, plaintext or with the test certificate. */
  static async start(options: { tls?: boolean } = {}): Promise<FakeProxy> {
    const proxy = new FakeProxy();
    const credentials = options.tls
      ? ServerCredentials.createSsl(null, [
          {
            private_key: readFileSync(new URL('tls/server-key.pem', import.meta.url)),
            cert_chain: readFileSync(new URL('tls/server.pem', import.meta.url)),
          },
        ])
      : ServerCredentials.createInsecure();
    const port = await new Promise<number>((resolve, reject) =>
      proxy.#server.bindAsync('127.0.0.1:0', credentials, (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    proxy.address = `127.0.0.1:${port}`;
    return proxy;
  }

  /** The most recent call, once its config arrived. */
  async last(): Promise<ScriptedCall> {
    for (let tries = 0; tries < 500; tries += 1) {
      const call = this.calls.at(-1);
      if (call?.config !== undefined) return call;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('no call reached the server');
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.tryShutdown(() => resolve()));
  }
}

export { LogSource };
