/**
 * A worker process SIGKILLed mid-call, through both relays of a real router: the clients (Python
 * and TypeScript) get UNAVAILABLE naming the worker, never CANCELLED, which stays what a client
 * that cancelled itself gets.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  CallCancelledError,
  ClusterUnavailableError,
  ReadieClient,
} from '../../src/client/index.js';
import type { ClusterEvent } from '../../src/events/types.js';
import { grpcJsRelay } from '../../bench/grpc-js-relay/index.js';
import { runReadie, type Child } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { ROOT } from '../support/replay.js';
import { SLEEP_SOURCE } from '../support/real-worker.js';
import {
  eventually,
  readLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** The Python client calling a function that sleeps a minute; prints how it ended, as JSON. */
const PYTHON_CALL = `
import json, readie

@readie.remote(stream_logs=False)
def nap(seconds):
    import time
    time.sleep(seconds)
    return seconds

try:
    print(json.dumps({"result": nap(60)}))
except readie.ReadieError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
`;

/** `readie worker` as a child reporting to `router`. */
function childWorker(router: string, workerId: string): Child {
  return runReadie([
    'worker',
    '--router',
    router,
    '--listen',
    '127.0.0.1:0',
    '--id',
    workerId,
    '--state-dir',
    join(tempDir('wk-'), 'state'),
    '--python',
    PYTHON,
    '--insecure',
    '--auth',
    'none',
    '--restore-backend',
    'template',
    '--memory',
    '8GiB',
    '--flavor',
    'cpu',
  ]);
}

/** A Python client process making one call; resolves with what it printed last. */
function pythonCall(address: string): Promise<Record<string, string>> {
  const child = spawn(PYTHON, ['-c', PYTHON_CALL], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      PYTHONPATH: join(ROOT, 'python'),
      READIE_ADDRESS: address,
      READIE_INSECURE: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  return new Promise((resolve, reject) =>
    child.on('exit', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as Record<string, string>);
      else reject(new Error(`the Python client exited ${code}: ${stdout}\n${stderr}`));
    }),
  );
}

const nap = (seconds: number) => ({ source: SLEEP_SOURCE, function: 'nap', args: [seconds] });

// The product's HTTP/2 relay, and the first one (grpc-js), kept in bench/ as a baseline.
const RELAYS = { http2: undefined, 'grpc-js': grpcJsRelay } as const;

for (const relay of ['http2', 'grpc-js'] as const) {
  describe(`a worker SIGKILLed mid-call, through the ${relay} relay (real worker process)`, function () {
    this.timeout(180_000);
    let router: TestRouter;
    let worker: Child | undefined;
    const workerId = `killed-${relay}-${process.pid}`;

    before(async () => {
      router = await startTestRouter({ relay: RELAYS[relay] });
      worker = childWorker(router.address, workerId);
      await eventually(
        () => router.router.state.workers.get(workerId)?.status === 'ready',
        'the worker to register',
        120_000,
      );
    });

    after(async () => {
      worker?.process.kill('SIGKILL');
      await worker?.exited;
      await router?.close();
      cleanTempDirs();
    });

    /** The calls running on the worker now (their containers reported busy). */
    const busyContainers = () =>
      [...(router.router.state.workers.get(workerId)?.containers.values() ?? [])].filter(
        (container) => container.state === 'busy',
      ).length;
    const finished = () =>
      readLog(router.logDir).filter(
        (event): event is Extract<ClusterEvent, { type: 'CallFinished' }> =>
          event.type === 'CallFinished',
      );

    it('a client that cancels its call gets CANCELLED, and the call finishes CANCELLED', async () => {
      const client = new ReadieClient({ address: router.address, insecure: true });
      try {
        const before = finished().length;
        const call = client.spawn(nap(60));
        await eventually(() => busyContainers() === 1, 'the call to run', 60_000);
        expect(call.cancel()).to.be.true;
        expect(await call.result.catch((error: unknown) => error)).to.be.instanceOf(
          CallCancelledError,
        );
        await eventually(() => finished().length === before + 1, 'the call to finish', 20_000);
        expect(finished().at(-1)).to.include({ ok: false, code: 'CANCELLED' });
        await eventually(() => busyContainers() === 0, 'its container to go', 20_000);
      } finally {
        client.close();
      }
    });

    it('killed with a call of each client on it: both get UNAVAILABLE naming the worker', async () => {
      const client = new ReadieClient({ address: router.address, insecure: true });
      try {
        const before = finished().length;
        const typescript = client.call(nap(60)).catch((error: unknown) => error);
        const python = pythonCall(router.address);
        await eventually(() => busyContainers() === 2, 'both calls to run', 60_000);
        worker!.process.kill('SIGKILL');
        expect((await worker!.exited).signal).to.equal('SIGKILL');

        const failure = await typescript;
        expect(failure).to.be.instanceOf(ClusterUnavailableError);
        expect(String(failure)).to.include(`worker ${workerId}`);
        const answer = await python;
        expect(answer.error, answer.message).to.equal('ClusterUnavailableError');
        expect(answer.message).to.include(`worker ${workerId}`);

        await eventually(() => finished().length === before + 2, 'both calls to finish', 20_000);
        expect(
          finished()
            .slice(before)
            .map((event) => event.code),
        ).to.deep.equal(['UNAVAILABLE', 'UNAVAILABLE']);
      } finally {
        client.close();
      }
    });
  });
}
