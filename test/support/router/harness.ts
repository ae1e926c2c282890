/**
 * Router tests over real gRPC on loopback: an in-process router on a temporary log, a ProxyService
 * client, calls driven message by message, and the log folded from disk.
 */
import {
  credentials,
  Metadata,
  type ChannelCredentials,
  type ClientDuplexStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { EventLog, type ClusterEvent } from '../../../src/events/index.js';
import { fold, type ClusterState } from '../../../src/projections/index.js';
import {
  LogSource,
  PayloadFormat,
  type CallIds,
  type LogLine,
} from '../../../src/proto/gen/readie/v1/call.js';
import {
  ProxyServiceClient,
  type CallConfig,
  type RequestExecutionRequest,
  type QueueNotice,
  type RequestExecutionResponse,
} from '../../../src/proto/gen/readie/v1/proxy.js';
import {
  createLogger,
  startRouter,
  type Router,
  type RouterOptions,
} from '../../../src/router/index.js';
import { codeName } from '../../../src/router/grpc-status.js';
import { bearerMetadata } from '../../../src/router/security/index.js';
import { DEFAULT_CONFIG, type Config } from '../../../src/shared/config.js';
import { eventuallyAsync, readLog as readStream } from '../jetstream-routers.js';
import { closeLater, readLiveLog } from '../live-log.js';
import { tempDir } from '../temp.js';

/** Settings for tests: timers slow enough to stay out of the way unless a test shortens them. */
export const TEST_CONFIG: Config = {
  ...DEFAULT_CONFIG,
  PROBE_INTERVAL: 3_600_000,
  REAPER_INTERVAL: 3_600_000,
  PROBE_TIMEOUT: 2_000,
};

/** A router started for a test, with a client of its ProxyService. */
export interface TestRouter {
  readonly router: Router;
  readonly logDir: string;
  readonly address: string;
  readonly client: ProxyServiceClient;
  /** Closes the client and the router. */
  close(): Promise<void>;
}

/** Starts a router on 127.0.0.1 with a fresh log, insecure unless told otherwise. */
export async function startTestRouter(
  options: Partial<Omit<RouterOptions, 'config'>> & {
    config?: Partial<Config>;
    clientCredentials?: ChannelCredentials;
    clientHost?: string;
  } = {},
): Promise<TestRouter> {
  const logDir = options.logDir ?? tempDir('readie-router-');
  const router = await startRouter({
    listen: '127.0.0.1:0',
    security: { kind: 'insecure' },
    logger: createLogger(process.env.READIE_TEST_LOG ?? 'silent'),
    version: 'test',
    ...options,
    logDir,
    config: { ...TEST_CONFIG, ...options.config },
  });
  const port = router.address.split(':').at(-1);
  const address = `${options.clientHost ?? '127.0.0.1'}:${port}`;
  const client = new ProxyServiceClient(
    address,
    options.clientCredentials ?? credentials.createInsecure(),
  );
  return {
    router,
    logDir,
    address,
    client,
    async close() {
      client.close();
      await router.close(500);
    },
  };
}

/** What a call gave back. */
export interface CallOutcome {
  readonly chunks: Buffer[];
  readonly logs: LogLine[];
  /** The IDs of every answer, in order. */
  readonly ids: CallIds[];
  /** The admission queue's notices, in order (queued, then admitted). */
  readonly queue: QueueNotice[];
  /** The error status, or undefined for OK. */
  readonly error: ServiceError | undefined;
  /** The payload answered, concatenated. */
  readonly payload: string;
}

/** A config with a request ID and the JSON format, plus `fields`. */
export function callConfig(fields: Partial<CallConfig> = {}): CallConfig {
  return {
    requestId: `req-${Math.random().toString(16).slice(2)}`,
    sessionId: '',
    imports: [],
    memory: undefined,
    gpuMemory: undefined,
    gpu: false,
    disableOptimizedExecution: false,
    packages: [],
    checkpointId: '',
    pythonVersion: '3.11.2',
    format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
    pinned: false,
    retryOf: '',
    function: '',
    ...fields,
  };
}

/** A message carrying a payload chunk. */
export function chunk(data: Buffer | string): RequestExecutionRequest {
  return {
    message: {
      $case: 'chunk',
      value: { data: typeof data === 'string' ? Buffer.from(data) : data },
    },
  };
}

/** A message carrying a config. */
export function configMessage(config: CallConfig): RequestExecutionRequest {
  return { message: { $case: 'config', value: config } };
}

/** Bearer-token metadata, as the router sends it to workers. */
export function bearer(token: string): Metadata {
  return bearerMetadata(token);
}

/** Collects a call's answers until its status. */
export function collect(
  stream: ClientDuplexStream<RequestExecutionRequest, RequestExecutionResponse>,
): Promise<CallOutcome> {
  const chunks: Buffer[] = [];
  const logs: LogLine[] = [];
  const ids: CallIds[] = [];
  const queue: QueueNotice[] = [];
  return new Promise((resolve) => {
    let error: ServiceError | undefined;
    stream.on('data', (answer: RequestExecutionResponse) => {
      if (answer.ids) ids.push(answer.ids);
      if (answer.message?.$case === 'chunk') chunks.push(answer.message.value.data);
      if (answer.message?.$case === 'log') logs.push(answer.message.value);
      if (answer.message?.$case === 'queue') queue.push(answer.message.value);
    });
    stream.on('error', (e: ServiceError) => (error = e));
    stream.on('status', () => {
      // 'status' comes after the last answer and any 'error'.
      setImmediate(() =>
        resolve({
          chunks,
          logs,
          ids,
          queue,
          error,
          payload: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
  });
}

/** Runs a call: sends `messages` (a config first, usually) and half-closes; collects the answers. */
export function exchange(
  client: ProxyServiceClient,
  messages: readonly RequestExecutionRequest[],
  options: { metadata?: Metadata; deadline?: number } = {},
): Promise<CallOutcome> {
  const stream = client.requestExecution(options.metadata ?? new Metadata(), {
    deadline: options.deadline ?? Date.now() + 30_000,
  });
  const outcome = collect(stream);
  for (const message of messages) stream.write(message);
  stream.end();
  return outcome;
}

/** Runs a call whose payload is one chunk holding `command` (see scripted-worker.ts). */
export function run(
  client: ProxyServiceClient,
  command: string,
  fields: Partial<CallConfig> = {},
  options: { metadata?: Metadata; deadline?: number } = {},
): Promise<CallOutcome> {
  return exchange(client, [configMessage(callConfig(fields)), chunk(command)], options);
}

/** The gRPC code name of an outcome (`OK` when it succeeded). */
export function codeOf(outcome: CallOutcome): string {
  return outcome.error ? codeName(outcome.error.code) : 'OK';
}

/** System log lines of an outcome, as text. */
export function systemLines(outcome: CallOutcome): string[] {
  return outcome.logs
    .filter((line) => line.source === LogSource.LOG_SOURCE_SYSTEM)
    .map((line) => line.text);
}

/**
 * Every event of a log directory, read from disk: through one kept handle when another process
 * is writing it (`readLiveLog`), else opened and closed (a writer in this process shares its
 * environment, and a closed log has no writer to race).
 */
export function readLog(dir: string): ClusterEvent[] {
  const live = readLiveLog(dir);
  if (live) return live;
  const log = EventLog.open(dir, { readOnly: true });
  try {
    return [...log.read()];
  } finally {
    closeLater(log);
  }
}

/**
 * Every event the router has recorded, once the log on disk holds them all: a call that created
 * no session pin ends before its events commit, so a read right after it may miss them.
 */
export async function settledLog(test: TestRouter): Promise<ClusterEvent[]> {
  let events: ClusterEvent[] = [];
  await eventually(
    () => (events = readLog(test.logDir)).at(-1)?.seq === test.router.state.lastSeq,
    () => `the log on disk to catch up with seq ${test.router.state.lastSeq}`,
  );
  return events;
}

/**
 * The events of the log at `location` (a directory, or a `nats://` stream) that a router in another
 * process writes, once they hold the CallFinished of each of `requestIds`: what `settledLog` is for
 * a router in this process. A call ends before its events commit (but for a session call that
 * created its pin), so a read right after it may miss them. A directory is read through `readLog`
 * (one kept handle) rather than opened at each poll: read-only opens repeated while another
 * process writes can make LMDB forget a commit.
 */
export async function finishedLog(
  location: string,
  requestIds: Iterable<string>,
  timeoutMs = 30_000,
): Promise<ClusterEvent[]> {
  const awaited = [...requestIds];
  let events: ClusterEvent[] = [];
  await eventuallyAsync(
    async () => {
      events = location.startsWith('nats://') ? await readStream(location) : readLog(location);
      const finished = new Set(ofType(events, 'CallFinished').map((event) => event.requestId));
      return awaited.every((requestId) => finished.has(requestId));
    },
    `the CallFinished of ${awaited.join(', ')} in the log at ${location}`,
    timeoutMs,
  );
  return events;
}

/** The events of `type` among `events`, typed as such. */
export function ofType<T extends ClusterEvent['type']>(
  events: readonly ClusterEvent[],
  type: T,
): Extract<ClusterEvent, { type: T }>[] {
  return events.filter((event): event is Extract<ClusterEvent, { type: T }> => event.type === type);
}

/** The events of one request, by type, from a log on disk. */
export function storyOf(events: readonly ClusterEvent[], requestId: string): string[] {
  return events
    .filter((event) => 'requestId' in event && event.requestId === requestId)
    .map((event) => event.type);
}

/** The state folded from a log directory on disk. */
export function foldLog(dir: string): ClusterState {
  return fold(readLog(dir));
}

/**
 * Waits until `check` holds, polling; fails with `what` after `timeoutMs` (a function: worked out
 * then, to say what was seen instead).
 */
export async function eventually(
  check: () => boolean,
  what: string | (() => string),
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
