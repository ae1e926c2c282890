/**
 * The admission queue is on by default (docs/placement.md, "The admission queue"): `readie
 * router` started with no `QUEUE_TIMEOUT` records 10 min in `RouterStarted.config`, queues a call
 * that finds no room (a scripted worker of one slot) and runs it once the slot frees; a queued
 * call whose client goes (the TypeScript client's abort, the Python client's Ctrl-C) leaves the
 * queue `cancelled`, logged.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { ReadieClient } from '../../src/client/index.js';
import type { ClusterEvent } from '../../src/events/index.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { runReadie, type Child } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import {
  callConfig,
  codeOf,
  eventually,
  readLog,
  run,
  storyOf,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));

describe('router: the admission queue by default (no QUEUE_TIMEOUT set)', function () {
  this.timeout(60_000);
  let router: Child;
  let address: string;
  let logDir: string;
  let client: ProxyServiceClient;
  let worker: ScriptedWorker;

  before(async () => {
    logDir = tempDir('readie-queue-default-');
    const env = { LOG_LEVEL: 'info' };
    expect(process.env.QUEUE_TIMEOUT, 'this test runs the router without QUEUE_TIMEOUT').to.equal(
      undefined,
    );
    router = runReadie(
      ['router', '--listen', '127.0.0.1:0', '--log', logDir, '--insecure', '--auth', 'none'],
      env,
    );
    const serving = await router.waitFor(/"msg":"router serving"/, 60_000);
    address = (JSON.parse(serving) as { address: string }).address;
    client = new ProxyServiceClient(address, credentials.createInsecure());
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(address).reportStatus({ maxContainers: 1 });
  });

  after(async () => {
    client.close();
    worker.stop();
    router.process.kill('SIGTERM');
    await router.exited;
    cleanTempDirs();
  });

  const events = (): ClusterEvent[] => readLog(logDir);

  /** Waits until the log on disk holds an event of `requestId` of `type`. */
  async function logged(requestId: string, type: ClusterEvent['type']): Promise<ClusterEvent> {
    let found: ClusterEvent | undefined;
    await eventually(() => {
      found = events().find(
        (e) => e.type === type && 'requestId' in e && e.requestId === requestId,
      );
      return found !== undefined;
    }, `${type} of ${requestId} on disk`);
    return found as ClusterEvent;
  }

  /**
   * Starts a call holding the only slot until `release()` (a gate of the scripted worker, not a
   * time: a loaded machine cannot free the slot before the test has its call queued); resolves
   * once it is placed.
   */
  let gates = 0;
  async function holdSlot(): Promise<{ readonly release: () => Promise<unknown> }> {
    const config = callConfig();
    const gate = `hold-${++gates}`;
    const done = run(client, `gate ${gate}`, config);
    await logged(config.requestId, 'CallPlaced');
    return {
      release: async () => {
        worker.open(gate);
        expect(codeOf(await done)).to.equal('OK');
      },
    };
  }

  it('records QUEUE_TIMEOUT 10 min, queues a call that finds no room and runs it when the slot frees', async () => {
    const started = events().find((e) => e.type === 'RouterStarted');
    expect(started?.type === 'RouterStarted' && started.config.QUEUE_TIMEOUT).to.equal(600_000);
    const first = await holdSlot();
    const config = callConfig();
    const second = run(client, 'echo waited', config);
    await logged(config.requestId, 'CallQueued');
    await first.release();
    const outcome = await second;
    expect(codeOf(outcome)).to.equal('OK');
    expect(outcome.payload).to.equal('echo waited');
    expect(outcome.queue.map((notice) => notice.queued)).to.deep.equal([true, false]);
    await logged(config.requestId, 'CallFinished');
    expect(storyOf(events(), config.requestId).slice(0, 4)).to.deep.equal([
      'CallRequested',
      'CallQueued',
      'CallAdmitted',
      'CallPlaced',
    ]);
  });

  it('the TypeScript client: aborting a queued call makes it leave the queue, cancelled', async () => {
    const first = await holdSlot();
    const readie = new ReadieClient({ address, insecure: true });
    const abort = new AbortController();
    try {
      const before = events().length;
      const call = readie
        .call({ module: 'math', function: 'hypot', args: [3, 4] }, { signal: abort.signal })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      let requestId = '';
      await eventually(() => {
        const queued = events()
          .slice(before)
          .find((e) => e.type === 'CallQueued');
        requestId = queued?.type === 'CallQueued' ? queued.requestId : '';
        return requestId !== '';
      }, 'the call queued on disk');
      abort.abort();
      expect(await call).to.be.instanceOf(Error);
      expect(await logged(requestId, 'CallLeftQueue')).to.deep.include({
        reason: 'cancelled',
        code: 'CANCELLED',
      });
      // It was never placed, and never tried again.
      expect(storyOf(events(), requestId)).to.deep.equal([
        'CallRequested',
        'CallQueued',
        'CallLeftQueue',
      ]);
    } finally {
      readie.close();
    }
    await first.release();
  });

  it('the Python client: Ctrl-C on a queued call makes it leave the queue, cancelled', async () => {
    const first = await holdSlot();
    const before = events().length;
    const python = spawn(
      PYTHON,
      ['-c', ['import readie', 'f = readie.remote(abs)', 'print(f(-1))'].join('\n')],
      {
        env: {
          PATH: process.env.PATH,
          PYTHONPATH: PYTHON_ROOT,
          READIE_ADDRESS: address,
          READIE_INSECURE: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const exited = new Promise<number | null>((resolve) => python.on('exit', resolve));
    try {
      let requestId = '';
      await eventually(() => {
        const queued = events()
          .slice(before)
          .find((e) => e.type === 'CallQueued');
        requestId = queued?.type === 'CallQueued' ? queued.requestId : '';
        return requestId !== '';
      }, 'the call queued on disk');
      python.kill('SIGINT');
      expect(await exited).to.not.equal(0);
      expect(await logged(requestId, 'CallLeftQueue')).to.deep.include({
        reason: 'cancelled',
        code: 'CANCELLED',
      });
      expect(
        events()
          .filter((e) => e.type === 'CallRequested')
          .slice(-1)[0],
        'the Python client tried it once',
      ).to.deep.include({ requestId });
    } finally {
      python.kill('SIGKILL');
    }
    await first.release();
  });
});
