/**
 * A call no worker could ever take, end to end (docs/placement.md, "Never fits and not now"): a
 * real router and a scripted worker offering 12 GiB; a 100 GiB call fails at once in both clients,
 * naming the largest offer, and neither client tries it again (the log holds one request per call).
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NeverFitsError, ReadieClient, type ReadieError } from '../../src/client/index.js';
import { settledLog, startTestRouter, type TestRouter } from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { PYTHON } from '../support/python.js';
import { cleanTempDirs } from '../support/temp.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));
const GiB = 1024 ** 3;
const OFFER = 'the largest worker offers 10.80GiB of memory; this call asks 100GiB';

describe('router: a call that never fits', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter();
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address).reportStatus({ memoryTotal: 12 * GiB });
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  /** The requests the router's log holds (a refused call ends before its events commit). */
  const requests = async () =>
    (await settledLog(test)).filter((e) => e.type === 'CallRequested').length;
  /**
   * The requests that tried a call again (none: no client tries a never-fitting call again): a
   * request ID requested twice, or a request naming the one it retries.
   */
  const retries = async () => {
    const requested = (await settledLog(test)).filter((e) => e.type === 'CallRequested');
    const again = requested.length - new Set(requested.map((e) => e.requestId)).size;
    return again + requested.filter((e) => e.retryOf !== null && e.retryOf !== '').length;
  };

  it('the TypeScript client: call, spawn and map fail at once with NeverFitsError, never retried', async () => {
    const client = new ReadieClient({ address: test.address, insecure: true });
    try {
      const fn = { module: 'math', function: 'hypot' };
      const before = await requests();
      const started = Date.now();
      const spawned = await client.spawn({ ...fn, args: [3, 4] }, { memory: '100GiB' }).result.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(Date.now() - started).to.be.below(1000);
      expect(spawned).to.be.instanceOf(NeverFitsError);
      expect((spawned as ReadieError).message).to.contain(OFFER);
      expect((spawned as ReadieError).notStarted).to.equal(true);
      let failed: unknown;
      try {
        for await (const value of client.map(fn, [1, 2], { memory: '100GiB' })) void value;
      } catch (error) {
        failed = error;
      }
      expect(failed).to.be.instanceOf(NeverFitsError);
      expect((failed as ReadieError).inputIndex).to.equal(0);
      expect((failed as ReadieError).message).to.match(/^input 0: the call can never fit/);
      // One request for the spawned call, and at most one per input of the map: the router
      // queues (by default), so the map may send both inputs before the first answer says no
      // input of this budget can ever fit; none is tried again.
      expect((await requests()) - before).to.be.within(2, 3);
      expect(await retries()).to.equal(0);
    } finally {
      client.close();
    }
  });

  it('the Python client: spawn().get() raises at once, map fails the input with its index', async () => {
    const before = await requests();
    const script = [
      'import time, readie',
      '@readie.remote(memory="100GiB")',
      'def f(x):',
      '    return x',
      't = time.monotonic()',
      'try:',
      '    f.spawn(1).get()',
      'except readie.NeverFitsError as e:',
      '    print(type(e).__name__, round(time.monotonic() - t, 3), e.not_started, str(e))',
      'try:',
      '    list(f.map([1, 2]))',
      'except readie.NeverFitsError as e:',
      '    print(type(e).__name__, e.input_index)',
      'outcomes = list(f.map([1, 2, 3], return_exceptions=True))',
      'print(*[f"{type(o).__name__}:{o.input_index}" for o in outcomes])',
    ].join('\n');
    const output = await new Promise<string>((resolve, reject) =>
      execFile(
        PYTHON,
        ['-c', script],
        {
          env: {
            PATH: process.env.PATH,
            PYTHONPATH: PYTHON_ROOT,
            READIE_ADDRESS: test.address,
            READIE_INSECURE: '1',
          },
        },
        (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout)),
      ),
    );
    const [spawned, mapped, kept] = output.trim().split('\n');
    const [name, seconds, notStarted] = (spawned ?? '').split(' ');
    expect(name).to.equal('NeverFitsError');
    expect(Number(seconds)).to.be.below(1);
    expect(notStarted).to.equal('True');
    expect(spawned).to.contain(OFFER);
    expect(mapped).to.match(/^NeverFitsError [01]$/);
    // With return_exceptions=True every input has its outcome, the first from the router's answer,
    // the others without a call of their own.
    expect(kept).to.equal('NeverFitsError:0 NeverFitsError:1 NeverFitsError:2');
    // The spawn's request and at most one per input of each map (the router queues by default,
    // so a map may send its inputs before the first answer): none is tried again.
    expect((await requests()) - before).to.be.within(3, 6);
    expect(await retries()).to.equal(0);
  });
});
