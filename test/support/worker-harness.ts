/**
 * Drives a real worker from tests: starts it in this process against a scripted router, and talks
 * to its ExecutionService through a real grpc-js client over loopback.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import type { Catalogue } from '../../src/events/catalogue.js';
import type { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { PayloadFormat, type CallIds, type LogLine } from '../../src/proto/gen/readie/v1/call.js';
import {
  ExecutionServiceClient,
  type CallHeader,
  type ExecuteResponse,
} from '../../src/proto/gen/readie/v1/execution.js';
import type { SandboxContext } from '../../src/worker/containers/index.js';
import {
  resolveWorkerOptions,
  Worker,
  type WorkerFlagValues,
  type WorkerTuning,
} from '../../src/worker/index.js';
import { UidClaims } from '../../src/worker/sandbox/index.js';
import { PYTHON } from './python.js';
import { ScriptedRouter } from './scripted-router.js';
import { tempDir } from './temp.js';

/** What a harness starts with. */
export interface HarnessOptions {
  readonly flags?: Partial<WorkerFlagValues>;
  readonly env?: Readonly<Record<string, string>>;
  readonly tuning?: Partial<WorkerTuning>;
  readonly catalogue?: Catalogue;
  readonly router?: ScriptedRouter;
  readonly log?: Logger;
  /** The directory to keep the worker's state in (a new temp dir if absent): a restart reuses it. */
  readonly stateDir?: string;
}

/** A running worker, its router, and a client. */
export interface Harness {
  readonly worker: Worker;
  readonly router: ScriptedRouter;
  readonly client: ExecutionServiceClient;
  readonly workerId: string;
  readonly stateDir: string;
  stop(): Promise<void>;
}

let counter = 0;

/** A unique worker ID for a test. */
export function testWorkerId(): string {
  counter += 1;
  return `t${process.pid}-${counter}`;
}

/** A worker's default sandbox (no egress), for tests that make containers without a worker. */
export async function testSandbox(): Promise<SandboxContext> {
  const { sandbox } = resolveWorkerOptions(
    { router: 'r:1', listen: 'l:1', id: 'w', flavor: 'cpu', insecure: true, auth: 'none' },
    {},
    { totalMemory: 1 },
  );
  return { policy: sandbox, identities: await UidClaims.open(sandbox.uids), slirp4netns: null };
}

/** Test logs: silent unless TEST_LOG names a level. */
export function testLogger() {
  return pino({ level: process.env['TEST_LOG'] ?? 'silent' });
}

/** Starts a worker (template backend, plaintext, a temp state dir) against a scripted router. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const router = options.router ?? (await ScriptedRouter.start());
  const stateDir = options.stateDir ?? tempDir('rw-');
  const workerId = testWorkerId();
  let catalogue: string | undefined;
  if (options.catalogue) {
    catalogue = join(stateDir, 'catalogue.json');
    writeFileSync(catalogue, JSON.stringify(options.catalogue));
  }
  const resolved = resolveWorkerOptions(
    {
      router: router.address,
      listen: '127.0.0.1:0',
      id: workerId,
      flavor: 'cpu',
      stateDir: join(stateDir, 'state'),
      python: PYTHON,
      insecure: true,
      auth: 'none',
      restoreBackend: 'template',
      ...(catalogue ? { catalogue } : {}),
      ...options.flags,
    },
    options.env ?? {},
    { totalMemory: 8 * 1024 ** 3 },
  );
  let worker: Worker;
  try {
    worker = await Worker.start(resolved, options.log ?? testLogger(), {
      registerRetryDelayMs: 50,
      checkpointRebuildDelayMs: 600_000,
      // The GPUs of the machine the tests run on are not the test's: none unless a test gives one.
      nvidiaSmi: null,
      ...options.tuning,
    });
  } catch (error) {
    // A worker that could not start leaves no router of ours behind.
    if (!options.router) await router.stop();
    throw error;
  }
  const client = new ExecutionServiceClient(
    `127.0.0.1:${worker.port}`,
    credentials.createInsecure(),
  );
  return {
    worker,
    router,
    client,
    workerId,
    stateDir,
    async stop() {
      client.close();
      await worker.stop();
      if (!options.router) await router.stop();
    },
  };
}

/** One answer, with when it arrived. */
export interface TimedResponse {
  readonly response: ExecuteResponse;
  readonly at: number;
}

/** Everything a call produced. */
export interface CallResult {
  readonly responses: TimedResponse[];
  readonly logs: (LogLine & { at: number })[];
  /** The result envelope's bytes, joined. */
  readonly result: Buffer;
  /** The sizes of the result chunks. */
  readonly chunkSizes: number[];
  readonly code: status;
  readonly details: string;
  /** The IDs of the first answer (every answer repeats them), or of a failed call's trailers. */
  readonly ids: CallIds | undefined;
  /** A failed call's trailing metadata. */
  readonly trailers: Record<string, string>;
  readonly startedAt: number;
  readonly endedAt: number;
}

/** How to make a call. */
export interface CallOptions {
  readonly metadata?: Metadata;
  /** Cancels the stream once the worker's first answer arrived (the call runs in its container). */
  readonly cancelOnFirstAnswer?: boolean;
  /** Sends the payload in chunks of this size (default 1 MiB). */
  readonly chunkSize?: number;
}

/** A header with sensible test defaults. */
export function header(
  fields: Partial<Omit<CallHeader, 'ids'>> & { ids?: Partial<CallIds> },
): CallHeader {
  return {
    memory: 512 * 1024 * 1024,
    gpu: false,
    imports: [],
    packages: [],
    pythonVersion: '',
    format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
    version: '',
    coldLoad: false,
    routingRevision: 0,
    tenantId: '',
    ...fields,
    ids: {
      requestId: `req-${Math.random().toString(16).slice(2, 10)}`,
      sessionId: '',
      workerId: '',
      containerId: '',
      checkpointId: '',
      version: '',
      routingRevision: 0,
      ...fields.ids,
    },
  };
}

/** Runs one Execute stream: the header, then the payload in chunks; collects every answer. */
export function execute(
  client: ExecutionServiceClient,
  callHeader: CallHeader,
  payload: Buffer,
  options: CallOptions = {},
): Promise<CallResult> {
  const startedAt = performance.now();
  const stream = client.execute(options.metadata ?? new Metadata());
  const responses: TimedResponse[] = [];
  stream.on('data', (response: ExecuteResponse) => {
    responses.push({ response, at: performance.now() });
    if (options.cancelOnFirstAnswer === true && responses.length === 1) stream.cancel();
  });
  stream.write({ message: { $case: 'header', value: callHeader } });
  const size = options.chunkSize ?? 1024 * 1024;
  for (let start = 0; start < payload.length; start += size) {
    stream.write({
      message: { $case: 'chunk', value: { data: payload.subarray(start, start + size) } },
    });
  }
  stream.end();
  return new Promise((resolve) => {
    let done = false;
    const finish = (code: status, details: string, metadata?: Metadata) => {
      if (done) return;
      done = true;
      const chunks = responses.flatMap(({ response }) =>
        response.message?.$case === 'chunk' ? [Buffer.from(response.message.value.data)] : [],
      );
      resolve({
        responses,
        logs: responses.flatMap(({ response, at }) =>
          response.message?.$case === 'log' ? [{ ...response.message.value, at }] : [],
        ),
        result: Buffer.concat(chunks),
        chunkSizes: chunks.map((chunk) => chunk.length),
        code,
        details,
        ids: responses[0]?.response.ids ?? idsOf(trailersOf(metadata)),
        trailers: trailersOf(metadata),
        startedAt,
        endedAt: performance.now(),
      });
    };
    stream.on('status', (s: { code: status; details: string; metadata: Metadata }) =>
      finish(s.code, s.details, s.metadata),
    );
    stream.on('error', (error: ServiceError) => finish(error.code, error.details, error.metadata));
  });
}

function trailersOf(metadata: Metadata | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata?.getMap() ?? {})) out[key] = String(value);
  return out;
}

function idsOf(trailers: Record<string, string>): CallIds | undefined {
  if (!('readie-request-id' in trailers)) return undefined;
  return {
    requestId: trailers['readie-request-id'] ?? '',
    sessionId: trailers['readie-session-id'] ?? '',
    workerId: trailers['readie-worker-id'] ?? '',
    containerId: trailers['readie-container-id'] ?? '',
    checkpointId: trailers['readie-checkpoint-id'] ?? '',
    version: trailers['readie-version'] ?? '',
    routingRevision: Number(trailers['readie-routing-revision'] ?? 0),
  };
}

/** A json-call payload running `source`'s function `fn`. */
export function jsonCall(
  source: string,
  fn: string,
  args: unknown[] = [],
  kwargs: object = {},
): Buffer {
  return Buffer.from(JSON.stringify({ module: null, source, function: fn, args, kwargs }));
}

/** The JSON envelope of a json-call result. */
export interface JsonEnvelope {
  ok: boolean;
  value?: unknown;
  error?: { type: string; module: string; message: string; traceback: string };
}

/** Parses a json-call result. */
export function envelopeOf(result: CallResult): JsonEnvelope {
  if (result.code !== status.OK) {
    throw new Error(`the call failed: ${status[result.code]} ${result.details}`);
  }
  return JSON.parse(result.result.toString('utf8')) as JsonEnvelope;
}

/** The text of the call's log lines from `source`. */
export function logText(result: CallResult, source: LogSource): string[] {
  return result.logs.filter((line) => line.source === source).map((line) => line.text);
}

/** A Python function source, dedented from a template literal. */
export function py(strings: TemplateStringsArray, ...values: unknown[]): string {
  const text = String.raw({ raw: strings }, ...values);
  const lines = text.replace(/^\n/, '').split('\n');
  const indent = Math.min(
    ...lines.filter((line) => line.trim()).map((line) => line.length - line.trimStart().length),
  );
  return lines.map((line) => line.slice(indent)).join('\n');
}

/** A full report a worker took: its number, what it listed, and when (performance.now()). */
export interface TakenReport {
  readonly reportSeq: number;
  readonly containerIds: readonly string[];
  readonly at: number;
}

/**
 * Records every load report (a full report) `worker` takes from now on, as it takes it, whether
 * or not it reaches a router: the worker's own view, to compare with what a router heard.
 */
export function recordFullReports(worker: Worker): TakenReport[] {
  const taken: TakenReport[] = [];
  const take = worker.utilizationRequest.bind(worker);
  worker.utilizationRequest = async () => {
    const report = await take();
    taken.push({
      reportSeq: report.reportSeq,
      containerIds: report.containers.map((container) => container.containerId).sort(),
      at: performance.now(),
    });
    return report;
  };
  return taken;
}
