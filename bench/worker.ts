/**
 * The worker (run as root: it makes cgroups and namespaces):
 * - the restore paths (worker-restores.ts): time to first answered call on a new container, cold
 *   beside the template and CRIU backends, from a standby and on demand; memory per container;
 *   images; a heavy checkpoint;
 * - the sandbox's cost (worker-hardening.ts): the same starts with the hardened sandbox beside the
 *   sandbox before its hardening (target: at most 5 ms more for a checkpoint start), and with
 *   --network egress beside none, for both backends;
 * - per-call time on a warm session container (target < 2 ms), beside a bare unix-socket round
 *   trip to a Python process and a bare gRPC stream round trip on loopback.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect } from 'node:net';
import { join } from 'node:path';
import { credentials, Server, ServerCredentials } from '@grpc/grpc-js';
import { pino } from 'pino';
import {
  ExecutionServiceClient,
  ExecutionServiceService,
  type ExecuteRequest,
  type ExecuteResponse,
  type ExecutionServiceServer,
} from '../src/proto/gen/readie/v1/execution.js';
import { encodeFrame, FrameDecoder, FrameType } from '../src/worker/executor-link/index.js';
import { EXECUTOR_DIR } from '../src/worker/sandbox/index.js';
import { CATALOGUE } from '../test/support/catalogues.js';
import { PYTHON } from '../test/support/python.js';
import { cleanTempDirs, tempDir } from '../test/support/temp.js';
import type { ScriptedRouter } from '../test/support/scripted-router.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  startHarness,
} from '../test/support/worker-harness.js';
import { ratio, median, percentile } from './support.js';
import { hardening } from './worker-hardening.js';
import { restores } from './worker-restores.js';

const WARM_CALLS = 300;
const TRIVIAL_CALL = jsonCall('def f():\n    return 1\n', 'f');

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A Python process answering one frame per connection over a unix socket, like an executor. */
async function unixRoundTrips(count: number): Promise<number[]> {
  const dir = tempDir('rw-bench-');
  const path = join(dir, 'echo.sock');
  const server = spawn(
    PYTHON,
    [
      '-c',
      [
        'import socket, sys',
        'from readie_executor import frames',
        's = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)',
        'print("ready", flush=True)',
        'while True:',
        '    c, _ = s.accept(); r = c.makefile("rb")',
        '    c.sendall(frames.encode_json(frames.HELLO, {}))',
        '    kind, body = frames.read_frame(r)',
        '    c.sendall(frames.encode(frames.RESULT, body) + frames.encode_json(frames.RESULT_END, {}))',
        '    c.close()',
      ].join('\n'),
      path,
    ],
    { cwd: EXECUTOR_DIR, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise((resolve) => server.stdout.once('data', resolve));
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      const socket = connect({ path });
      const decoder = new FrameDecoder();
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        for (const frame of decoder.push(chunk)) {
          if (frame.type === FrameType.HELLO)
            socket.write(encodeFrame(FrameType.PAYLOAD, TRIVIAL_CALL));
          if (frame.type === FrameType.RESULT_END) {
            socket.end();
            resolve(performance.now() - started);
          }
        }
      });
    });
  const times: number[] = [];
  for (let i = 0; i < count; i += 1) times.push(await once());
  server.kill('SIGKILL');
  return times;
}

/** An in-process gRPC ExecutionService that answers one chunk per stream. */
async function grpcRoundTrips(count: number): Promise<number[]> {
  const server = new Server();
  const echo: ExecutionServiceServer = {
    destroySessionContainer: (_call, callback) => callback(null, { removed: false }),
    callOutput: (stream) => stream.end(),
    execute: (stream) => {
      stream.on('data', (message: ExecuteRequest) => {
        if (message.message?.$case === 'chunk') {
          const response: ExecuteResponse = {
            ids: {
              requestId: 'r',
              sessionId: 's',
              workerId: 'w',
              containerId: 'c',
              checkpointId: '',
              version: '',
              routingRevision: 0,
            },
            message: { $case: 'chunk', value: { data: Buffer.from('{"ok": true, "value": 1}') } },
          };
          stream.write(response);
        }
      });
      stream.on('end', () => stream.end());
    },
  };
  server.addService(ExecutionServiceService, echo);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, p) =>
      error ? reject(error) : resolve(p),
    ),
  );
  const client = new ExecutionServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());
  const times: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const result = await execute(client, header({}), TRIVIAL_CALL);
    times.push(result.endedAt - result.startedAt);
  }
  client.close();
  server.forceShutdown();
  return times;
}

/** The scripted router in a child process, as a real router is: its work is not on our loop. */
async function routerProcess(): Promise<{ address: string; stop: () => void }> {
  const script = fileURLToPath(new URL('./router-process.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve) =>
    child.stdout.once('data', (data: Buffer) => resolve(data.toString().trim())),
  );
  return { address: `127.0.0.1:${port}`, stop: () => child.stdin.end() };
}

/** Runs the worker benchmark. */
export async function run() {
  const router = await routerProcess();
  const remote = { address: router.address } as ScriptedRouter;
  // The worker's own account of each warm call ('call answered', from acquire to release).
  const handled: number[] = [];
  const log = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as { msg: string; ms?: number; sessionId?: string };
        if (entry.msg === 'call answered' && entry.sessionId === 'bench') handled.push(entry.ms!);
      },
    },
  );
  const restoreFigures = await restores(remote);
  const sandboxFigures = await hardening(remote);
  const standby = await startHarness({
    log,
    router: remote,
    catalogue: CATALOGUE,
    flags: { maxContainers: '0', restoreBackend: 'template' },
  });
  try {
    const session = await execute(
      standby.client,
      header({ ids: { sessionId: 'bench' } }),
      TRIVIAL_CALL,
    );
    const containerId = session.ids!.containerId;
    const warm: number[] = [];
    for (let i = 0; i < WARM_CALLS; i += 1) {
      const result = await execute(
        standby.client,
        header({ ids: { sessionId: 'bench', containerId } }),
        TRIVIAL_CALL,
      );
      if (envelopeOf(result).value !== 1) throw new Error('warm call failed');
      warm.push(result.endedAt - result.startedAt);
    }
    const unix = await unixRoundTrips(WARM_CALLS);
    const grpc = await grpcRoundTrips(WARM_CALLS);

    const warmMs = median(warm);
    const grpcMs = median(grpc);
    return {
      ...restoreFigures,
      sandbox: sandboxFigures,
      warmSessionCall: {
        what: 'a trivial json-call on a warm session container, end to end over gRPC on loopback',
        calls: WARM_CALLS,
        callMs: round(warmMs),
        callP90Ms: round(percentile(warm, 0.9)),
        baselineGrpcStreamRoundTripMs: round(grpcMs),
        baselineUnixSocketRoundTripMs: round(median(unix)),
        overheadMs: round(warmMs - grpcMs),
        overheadNote:
          'callMs minus the bare gRPC stream round trip: what the worker adds to the transport',
        workerHandlingMs: round(median(handled)),
        workerHandlingNote:
          "the worker's own time per warm call (resume, executor round trip, relay, release), from its logs",
        overGrpcBaseline: ratio(warmMs, grpcMs),
        target: 'overheadMs < 2',
      },
    };
  } finally {
    await standby.stop();
    router.stop();
    cleanTempDirs();
  }
}
