/**
 * A scripted worker for router tests and benchmarks: a real grpc-js server implementing
 * `ExecutionService` and `grpc.health.v1`, and a real `RegistryService` client to report to the
 * router. What a call does is read from the first payload chunk, a command line:
 *
 * - `echo`: answer every chunk with the same bytes, then OK;
 * - `raise TYPE MESSAGE...`: answer one chunk, then OK with `readie-raised` trailers (the function
 *   raised TYPE: MESSAGE);
 * - `batch RAISED`: answer one chunk, then OK with the `readie-inputs-raised` trailer (a batch of a
 *   map, RAISED of whose inputs raised);
 * - `fail CODE [message]`: read the payload, then end with that gRPC status;
 * - `oom BYTES`: read the payload, then end as a real worker does for a call killed for exceeding
 *   its memory budget of BYTES (RESOURCE_EXHAUSTED and its trailers);
 * - `refuse CODE`: read the payload, then end with that status and `readie-not-started`;
 * - `partial CODE`: answer a chunk `partial` at once, then end with that status after the payload;
 * - `hang`: never answer (until cancelled);
 * - `hold`: answer a chunk `hold` at once, then never finish (until cancelled);
 * - `logs N`: N stdout log lines, then a chunk `done`;
 * - `sleep MS`: wait, then a chunk `slept`;
 * - `gate NAME`: wait until the test calls `open(NAME)`, then a chunk `opened`;
 * - `count`: count the payload bytes (never holding them), answer the count as text;
 * - `stream N SIZE`: answer N chunks of SIZE bytes.
 *
 * Every answer carries the call's IDs with the container used (the header's, or a new `c<n>`)
 * and the checkpoint used (the header's, unless `checkpointUsed` says otherwise).
 *
 * With `containerSlots`, it counts its containers as a real worker does and reports them
 * (`scripted-slots.ts`): a new container at the limit is refused.
 *
 * It also serves `ResidencyService`, recording what the router tells it to keep and to pre-warm;
 * with `prewarmLoads`, a pre-warm reports `loading` then `resident` as a real worker would.
 */
import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type ChannelCredentials,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { inputsRaisedTrailers, raisedTrailers } from '../../../src/shared/raised.js';
import { LogSource, type CallIds } from '../../../src/proto/gen/readie/v1/call.js';
import {
  ExecutionServiceService,
  type CallHeader,
  type DestroySessionContainerRequest,
  type DestroySessionContainerResponse,
  type ExecuteRequest,
  type ExecuteResponse,
} from '../../../src/proto/gen/readie/v1/execution.js';
import type { ContainerState, HeldImageEntry } from '../../../src/proto/gen/readie/v1/registry.js';
import { ScriptedSlots } from './scripted-slots.js';
import { bearerMetadata } from '../../../src/router/security/index.js';
import {
  ResidencyServiceService,
  ResidencyState,
  type ResidencyServiceServer,
  type VersionResidency,
} from '../../../src/proto/gen/readie/v1/residency.js';
import {
  Flavor,
  RegistryServiceClient,
  WorkerStatus,
  type ReportStatusRequest,
  type ReportUtilizationRequest,
} from '../../../src/proto/gen/readie/v1/registry.js';

/** One call the worker received. */
export interface ReceivedCall {
  readonly header: CallHeader;
  readonly metadata: Metadata;
  readonly containerId: string;
  /** Payload bytes received so far. */
  bytes: number;
  cancelled: boolean;
  finished: boolean;
}

/** How to start a scripted worker. */
export interface ScriptedWorkerOptions {
  readonly workerId: string;
  /** The checkpoint to claim it used for a new container (default: the header's). */
  readonly checkpointUsed?: (header: CallHeader) => string;
  /** Serve TLS with this certificate chain and key. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** Refuse calls without `authorization: Bearer <token>` (as a real worker does). */
  readonly requireToken?: string;
  /**
   * The instance ID its reports name (a real worker draws one per process); default none, as a
   * worker from before instance IDs.
   */
  readonly instanceId?: string;
  /** The address it registers with (default: where it serves). */
  readonly advertise?: string;
  /** On a pre-warm, report the version loading, then resident (after `prewarmLoads` ms). */
  readonly prewarmLoads?: number;
  /** Count containers against this limit and report them, as a real worker does. */
  readonly containerSlots?: number;
}

type WorkerCall = ServerDuplexStream<ExecuteRequest, ExecuteResponse>;

const GiB = 1024 ** 3;

/** Trailers as gRPC metadata. */
function metadataOf(trailers: Readonly<Record<string, string>>): Metadata {
  const metadata = new Metadata();
  for (const [name, value] of Object.entries(trailers)) metadata.set(name, value);
  return metadata;
}

/** A scripted worker on loopback. */
export class ScriptedWorker {
  readonly calls: ReceivedCall[] = [];
  /** Every `DestroySessionContainer` the router sent, with the token it presented. */
  readonly sessionEnds: { sessionId: string; containerId: string; authorization: string }[] = [];
  /** Calls running now, by session (`''` outside sessions). */
  readonly running = new Map<string, number>();
  /** The most calls of one session that ever ran at once. */
  maxConcurrentPerSession = 0;
  /** Every protected set the router sent, in order. */
  readonly protects: { checkpointIds: string[]; seq: number; authorization: string }[] = [];
  /** Every pre-warm the router asked for, in order. */
  readonly prewarms: string[] = [];
  /** On a pre-warm, report loading then resident after this many ms; undefined: report nothing. */
  prewarmLoads: number | undefined;
  /** Its container slots, with `containerSlots`. */
  slots: ScriptedSlots | undefined;
  private containers = 0;
  private residentMemory: number | undefined;
  private registry: RegistryServiceClient | undefined;
  private registryMetadata = new Metadata();
  /** The number of its last numbered report. */
  private reportSeq = 0;
  /** Calls waiting at a gate, by its name; gates opened before a call reached them. */
  private readonly gates = new Map<string, () => void>();
  private readonly opened = new Set<string>();

  private constructor(
    readonly workerId: string,
    readonly address: string,
    private readonly server: Server,
    private readonly health: HealthImplementation,
    private readonly identity: { readonly instanceId: string; readonly advertise: string },
  ) {}

  /** The next report number (numbered reports only). */
  nextReportSeq(): number {
    this.reportSeq += 1;
    return this.reportSeq;
  }

  /** Calls it is running now. */
  get callsRunning(): number {
    let running = 0;
    for (const count of this.running.values()) running += count;
    return running;
  }

  /** Starts serving on 127.0.0.1 on a free port. */
  static async start(options: ScriptedWorkerOptions): Promise<ScriptedWorker> {
    const server = new Server();
    const health = new HealthImplementation({ '': 'SERVING' });
    health.addToServer(server);
    const serverCredentials = options.tls
      ? ServerCredentials.createSsl(
          null,
          [{ cert_chain: options.tls.cert, private_key: options.tls.key }],
          false,
        )
      : ServerCredentials.createInsecure();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', serverCredentials, (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    const host = options.tls ? 'localhost' : '127.0.0.1';
    const address = `${host}:${port}`;
    const worker = new ScriptedWorker(options.workerId, address, server, health, {
      instanceId: options.instanceId ?? '',
      advertise: options.advertise ?? address,
    });
    worker.prewarmLoads = options.prewarmLoads;
    if (options.containerSlots !== undefined) {
      worker.slots = new ScriptedSlots(options.containerSlots, (containerId, state) =>
        worker.reportContainer(containerId, state, '', worker.nextReportSeq()),
      );
    }
    server.addService(ExecutionServiceService, {
      execute: (call: WorkerCall) => worker.execute(call, options),
      destroySessionContainer: (
        call: ServerUnaryCall<DestroySessionContainerRequest, DestroySessionContainerResponse>,
        callback: sendUnaryData<DestroySessionContainerResponse>,
      ) => {
        const [authorization] = call.metadata.get('authorization');
        worker.sessionEnds.push({ ...call.request, authorization: String(authorization ?? '') });
        const removed = worker.slots?.endSession(call.request.containerId) ?? true;
        callback(null, { removed });
      },
    });
    const residency: ResidencyServiceServer = {
      protect: (call, callback) => {
        const [authorization] = call.metadata.get('authorization');
        worker.protects.push({
          checkpointIds: call.request.checkpointIds,
          seq: call.request.seq,
          authorization: String(authorization ?? ''),
        });
        callback(null, {});
      },
      prewarm: (call, callback) => {
        worker.prewarms.push(call.request.checkpointId);
        callback(null, { state: ResidencyState.RESIDENCY_STATE_LOADING });
        const delay = worker.prewarmLoads;
        if (delay === undefined) return;
        const version = call.request.checkpointId;
        void worker
          .reportResidency([
            { checkpointId: version, state: ResidencyState.RESIDENCY_STATE_LOADING, error: '' },
          ])
          .then(() => new Promise((resolve) => setTimeout(resolve, delay)))
          .then(() =>
            worker.reportResidency([
              { checkpointId: version, state: ResidencyState.RESIDENCY_STATE_RESIDENT, error: '' },
            ]),
          )
          .catch(() => undefined);
      },
    };
    server.addService(ResidencyServiceService, residency);
    return worker;
  }

  /** Lets the call waiting at gate `name` finish (or the next to reach it, at once). */
  open(name: string): void {
    const waiting = this.gates.get(name);
    this.gates.delete(name);
    if (waiting) waiting();
    else this.opened.add(name);
  }

  /** Turns the health status to SERVING or NOT_SERVING. */
  setServing(serving: boolean): void {
    this.health.setStatus('', serving ? 'SERVING' : 'NOT_SERVING');
  }

  /** Stops serving at once (calls are cut off). */
  stop(): void {
    this.registry?.close();
    this.server.forceShutdown();
  }

  /** Connects the registry client to the router. */
  connect(
    routerAddress: string,
    options: { credentials?: ChannelCredentials; token?: string } = {},
  ): this {
    this.registry?.close();
    this.registry = new RegistryServiceClient(
      routerAddress,
      options.credentials ?? credentials.createInsecure(),
    );
    this.registryMetadata = bearerMetadata(options.token);
    return this;
  }

  /** Reports a status (ready by default, with 16 GiB and 8 containers, CPU). */
  reportStatus(fields: Partial<ReportStatusRequest> = {}): Promise<void> {
    const request: ReportStatusRequest = {
      workerId: this.workerId,
      address: this.identity.advertise,
      status: WorkerStatus.WORKER_STATUS_READY,
      error: '',
      flavor: Flavor.FLAVOR_CPU,
      memoryTotal: 16 * GiB,
      maxContainers: 8,
      gpuMemoryTotal: 0,
      checkpoints: [],
      pythonVersion: '3.11.2',
      restoreBackend: 'template',
      instanceId: this.identity.instanceId,
      reportSeq: 0,
      containers: [],
      ...fields,
    };
    return new Promise((resolve, reject) =>
      this.client().reportStatus(request, this.registryMetadata, (error) =>
        error ? reject(error) : resolve(),
      ),
    );
  }

  /**
   * Reports load (a count alone unless `fields` number it and list containers); resolves with
   * whether the router knows this worker.
   */
  reportUtilization(fields: Partial<ReportUtilizationRequest> = {}): Promise<boolean> {
    const request: ReportUtilizationRequest = {
      workerId: this.workerId,
      memoryUsed: 0,
      containerCount: this.callsRunning,
      cpuUsed: 0,
      cpuTotal: 2,
      gpuMemoryUsed: 0,
      instanceId: this.identity.instanceId,
      reportSeq: 0,
      containers: [],
      standbys: [],
      ...fields,
    };
    return new Promise((resolve, reject) =>
      this.client().reportUtilization(request, this.registryMetadata, (error, response) =>
        error ? reject(error) : resolve(response.registered),
      ),
    );
  }

  /**
   * Reports versions' residency with its budget (the last one given, as a real worker reports
   * it on every report); resolves with whether the router knows it.
   */
  reportResidency(versions: VersionResidency[], residentMemory?: number): Promise<boolean> {
    if (residentMemory !== undefined) this.residentMemory = residentMemory;
    return new Promise((resolve, reject) =>
      this.client().reportResidency(
        { workerId: this.workerId, residentMemory: this.residentMemory, versions },
        this.registryMetadata,
        (error, response) => (error ? reject(error) : resolve(response.registered)),
      ),
    );
  }

  /** Reports a container's state; resolves with whether the router knows this worker. */
  reportContainer(
    containerId: string,
    state: ContainerState,
    checkpointId = '',
    reportSeq = 0,
  ): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.client().reportContainerState(
        {
          workerId: this.workerId,
          containerId,
          state,
          checkpointId,
          instanceId: this.identity.instanceId,
          reportSeq,
        },
        this.registryMetadata,
        (error, response) => (error ? reject(error) : resolve(response.registered)),
      ),
    );
  }

  /** Reports every image it holds; resolves with whether the router knows this worker. */
  reportHeldImages(images: HeldImageEntry[], complete = true): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.client().reportHeldImages(
        { workerId: this.workerId, images, complete },
        this.registryMetadata,
        (error, response) => (error ? reject(error) : resolve(response.registered)),
      ),
    );
  }

  private client(): RegistryServiceClient {
    if (!this.registry) throw new Error('connect() the worker to the router first');
    return this.registry;
  }

  private execute(call: WorkerCall, options: ScriptedWorkerOptions): void {
    if (options.requireToken !== undefined) {
      const [value] = call.metadata.get('authorization');
      if (value !== `Bearer ${options.requireToken}`) {
        call.emit('error', { code: status.UNAUTHENTICATED, details: 'worker: wrong token' });
        return;
      }
    }
    let received: ReceivedCall | undefined;
    let ids: CallIds | undefined;
    let command: string[] | undefined;
    let sessionKey = '';
    let count = 0;
    const answer = (message: ExecuteResponse['message']): boolean =>
      received?.cancelled === true || call.write({ ids, message });
    const finish = (
      error?: { code: status; details: string; metadata?: Metadata },
      trailers?: Metadata,
    ) => {
      if (!received || received.finished) return;
      received.finished = true;
      this.running.set(sessionKey, (this.running.get(sessionKey) ?? 1) - 1);
      // As a real worker: the container is kept or destroyed before the stream ends.
      this.slots?.release(received.containerId, !error && !received.cancelled);
      if (received.cancelled) return;
      if (error) call.emit('error', error);
      else call.end(trailers);
    };
    call.on('cancelled', () => {
      if (received) {
        received.cancelled = true;
        finish();
      }
    });
    call.on('data', (request: ExecuteRequest) => {
      const message = request.message;
      if (message?.$case === 'header') {
        const header = message.value;
        const containerId = header.ids?.containerId || `c${++this.containers}`;
        const refusal = this.slots?.take(
          containerId,
          header.ids?.sessionId ?? '',
          Boolean(header.ids?.containerId),
        );
        if (refusal) {
          // As a real worker refuses a container at its limit: before the function started.
          const metadata = new Metadata();
          metadata.set('readie-not-started', '1');
          call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: refusal, metadata });
          return;
        }
        const checkpointId = header.ids?.containerId
          ? (header.ids.checkpointId ?? '')
          : (options.checkpointUsed?.(header) ?? header.ids?.checkpointId ?? '');
        ids = {
          requestId: header.ids?.requestId ?? '',
          sessionId: header.ids?.sessionId ?? '',
          workerId: this.workerId,
          containerId,
          checkpointId,
          version: header.version,
          routingRevision: header.routingRevision,
        };
        received = {
          header,
          metadata: call.metadata,
          containerId,
          bytes: 0,
          cancelled: false,
          finished: false,
        };
        this.calls.push(received);
        sessionKey = ids.sessionId;
        const now = (this.running.get(sessionKey) ?? 0) + 1;
        this.running.set(sessionKey, now);
        if (sessionKey !== '') {
          this.maxConcurrentPerSession = Math.max(this.maxConcurrentPerSession, now);
        }
        return;
      }
      if (message?.$case !== 'chunk' || !received) return;
      received.bytes += message.value.data.length;
      if (!command) {
        command = message.value.data.toString('utf8', 0, 200).split('\n')[0]?.split(' ') ?? [];
        this.begin(command, call, answer, finish);
      }
      if (command[0] === 'echo') {
        if (
          !call.write({ ids, message: { $case: 'chunk', value: { data: message.value.data } } })
        ) {
          call.pause();
          call.once('drain', () => call.resume());
        }
      } else if (command[0] === 'count') {
        count += message.value.data.length;
      }
    });
    call.on('end', () => {
      const verb = command?.[0];
      if (verb === 'echo') finish();
      else if (verb === 'raise') {
        // OK, with what the function raised in the trailers, as a worker ends such a call.
        answer({ $case: 'chunk', value: { data: Buffer.from('an error envelope') } });
        const raised = {
          type: command?.[1] ?? 'ValueError',
          message: command?.slice(2).join(' ') ?? '',
        };
        finish(undefined, metadataOf(raisedTrailers(raised)));
      } else if (verb === 'batch') {
        answer({ $case: 'chunk', value: { data: Buffer.from('the batch outcomes') } });
        finish(undefined, metadataOf(inputsRaisedTrailers(Number(command?.[1] ?? 0))));
      } else if (verb === 'count') {
        answer({ $case: 'chunk', value: { data: Buffer.from(String(count)) } });
        finish();
      } else if (verb === 'fail' || verb === 'partial') {
        const code = status[command?.[1] as keyof typeof status] ?? status.INTERNAL;
        finish({ code, details: command?.slice(2).join(' ') || 'scripted failure' });
      } else if (verb === 'oom') {
        const metadata = new Metadata();
        metadata.set('readie-killed', 'out-of-memory');
        metadata.set('readie-memory-budget', command?.[1] ?? '0');
        metadata.set('readie-request-id', received?.header.ids?.requestId ?? '');
        finish({
          code: status.RESOURCE_EXHAUSTED,
          details: `the call ran out of memory: it was killed when it exceeded its memory budget of ${command?.[1] ?? 0} bytes`,
          metadata,
        });
      } else if (verb === 'refuse') {
        const metadata = new Metadata();
        metadata.set('readie-not-started', '1');
        const code = status[command?.[1] as keyof typeof status] ?? status.INTERNAL;
        finish({ code, details: 'scripted refusal before the function', metadata });
      } else if (verb === undefined) {
        answer({ $case: 'chunk', value: { data: Buffer.alloc(0) } });
        finish();
      }
    });
  }

  /** Starts the commands that act at once (not at the end of the payload). */
  private begin(
    command: readonly string[],
    call: WorkerCall,
    answer: (message: ExecuteResponse['message']) => boolean,
    finish: (error?: { code: status; details: string }) => void,
  ): void {
    switch (command[0] ?? '') {
      case 'logs': {
        for (let i = 0; i < Number(command[1] ?? 1); i += 1) {
          answer({
            $case: 'log',
            value: { source: LogSource.LOG_SOURCE_STDOUT, text: `line ${i}` },
          });
        }
        answer({ $case: 'chunk', value: { data: Buffer.from('done') } });
        finish();
        return;
      }
      case 'hold':
      case 'partial':
        answer({ $case: 'chunk', value: { data: Buffer.from(command[0] ?? '') } });
        return;
      case 'gate': {
        const name = command[1] ?? '';
        const pass = () => {
          answer({ $case: 'chunk', value: { data: Buffer.from('opened') } });
          finish();
        };
        if (this.opened.delete(name)) pass();
        else this.gates.set(name, pass);
        return;
      }
      case 'sleep':
        setTimeout(
          () => {
            answer({ $case: 'chunk', value: { data: Buffer.from('slept') } });
            finish();
          },
          Number(command[1] ?? 0),
        );
        return;
      case 'stream': {
        const chunks = Number(command[1] ?? 1);
        const data = Buffer.alloc(Number(command[2] ?? 1024), 7);
        let sent = 0;
        const pump = () => {
          while (sent < chunks) {
            sent += 1;
            if (!answer({ $case: 'chunk', value: { data } })) {
              call.once('drain', pump);
              return;
            }
          }
          finish();
        };
        pump();
        return;
      }
      default:
        return;
    }
  }
}
