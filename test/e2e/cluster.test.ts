import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ReadieClient, RemoteExecutionError } from '../../src/client/index.js';
import { startE2eCluster, type E2eCluster } from '../support/e2e-cluster.js';
import { PYTHON } from '../support/python.js';
import { eventually, readLog } from '../support/router/harness.js';
import { ROOT } from '../support/replay.js';

const SCRIPT = join(ROOT, 'test', 'e2e', 'scripts', 'calls.py');

interface ScriptRun {
  readonly result: Record<string, unknown>;
  readonly stderr: string;
}

describe('end to end: clients -> nginx -> router -> workers', function () {
  this.timeout(120_000);
  let cluster: E2eCluster;

  before(async function () {
    this.timeout(180_000);
    cluster = await startE2eCluster();
  });

  after(async () => {
    await cluster?.stop();
  });

  /** Runs a scenario of calls.py as a real client process and returns its JSON answer. */
  function python(
    scenario: string,
    args: string[] = [],
    env: Record<string, string> = {},
  ): ScriptRun {
    const run = spawnSync(PYTHON, [SCRIPT, scenario, ...args], {
      env: cluster.clientEnv(env),
      encoding: 'utf8',
      timeout: 100_000,
    });
    const last = run.stdout.trim().split('\n').at(-1) ?? '';
    if (run.status !== 0 || !last.startsWith('{')) {
      throw new Error(`calls.py ${scenario} exited ${run.status}: ${run.stdout}\n${run.stderr}`);
    }
    return { result: JSON.parse(last) as Record<string, unknown>, stderr: run.stderr };
  }

  it('runs a plain call and says where it ran', () => {
    const { result } = python('plain');
    expect(result.value).to.equal(5);
    expect([...cluster.workers.keys()]).to.include(result.worker);
    expect(result.container).to.be.a('string').and.not.equal('');
  });

  it('raises a user exception with its remote traceback', () => {
    const { result } = python('exception');
    expect(result.type).to.equal('ValueError');
    expect(result.message).to.equal('bad input: 42');
    // The frames of the user's code, wherever it was defined (its source lines appear only when
    // the sandbox can read the file, which it cannot from a private /tmp).
    expect(result.traceback)
      .to.contain('in fails')
      .and.contain('in inner')
      .and.contain('ValueError: bad input: 42');
  });

  it('prints the remote stdout and stderr', () => {
    const { result, stderr } = python('stdout');
    expect(result.value).to.equal('done');
    expect(stderr).to.contain('hello on stdout').and.contain('warning on stderr');
  });

  it('keeps a session state across three calls in one container', () => {
    const { result } = python('session');
    expect(result.values).to.deep.equal([1, 2, 3]);
    expect(result.session).to.match(/^ses-/);
  });

  it('installs a package from a local wheel directory, importable in the call', () => {
    expect(python('package').result.value).to.equal('hello from a wheel');
  });

  it('restores a checkpoint and names it in the answer', function () {
    if (spawnSync(PYTHON, ['-c', 'import numpy']).status !== 0) this.skip();
    const { result } = python('checkpoint');
    expect(result.value).to.equal(45);
    expect(result.checkpoint).to.equal('ckpt-numpy');
  });

  it('honours disable_optimized_execution: a cold start, no checkpoint', () => {
    const { result } = python('disable');
    expect(result.value).to.equal('cold');
    expect(result.checkpoint).to.equal('');
    // The same function without the flag restores a checkpoint, so the empty one above is the
    // flag's doing, not a cluster that never restores.
    expect(result.without).to.deep.include({ value: 'cold', checkpoint: 'checkpoint_0' });
  });

  it('carries a 64 MiB argument and result', () => {
    const { result } = python('big');
    expect(result).to.deep.include({ same: true, size: 64 * 1024 * 1024 });
  });

  it('an out-of-memory kill through nginx and the router is RemoteOutOfMemoryError with its budget, never a router hint', () => {
    const { result } = python('oom');
    expect(result.error).to.equal('RemoteOutOfMemoryError');
    expect(result.budget).to.equal(128 * 1024 * 1024);
    expect(result.not_started).to.equal(false);
    expect(result.message).to.match(
      /^the call ran out of memory at .*\(RESOURCE_EXHAUSTED\): worker e2e-w\d: /,
    );
    expect(result.message).to.include('memory budget of 128MiB');
    expect(result.message).to.not.include('READIE_ADDRESS');
  });

  it('refuses a wrong token', () => {
    const { result } = python('unauthenticated', [], { READIE_AUTH_TOKEN: 'not-the-token' });
    expect(result.error).to.equal('AuthenticationError');
  });

  it('cancels the work when the client disconnects mid-call', async () => {
    const before = readLog(cluster.logDir).length;
    const client = spawn(PYTHON, [SCRIPT, 'long', '120'], {
      env: cluster.clientEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = createInterface({ input: client.stdout });
    await once(lines, 'line');
    let requestId: string | undefined;
    await eventually(
      () => {
        const bound = readLog(cluster.logDir)
          .slice(before)
          .find((e) => e.type === 'CallBound');
        requestId = bound?.type === 'CallBound' ? bound.requestId : undefined;
        return requestId !== undefined;
      },
      'the long call to start',
      60_000,
    );
    client.kill('SIGKILL');
    await eventually(
      () =>
        readLog(cluster.logDir).some((e) => e.type === 'CallFinished' && e.requestId === requestId),
      'the router to finish the abandoned call',
      30_000,
    );
    const finished = readLog(cluster.logDir).find(
      (e) => e.type === 'CallFinished' && e.requestId === requestId,
    );
    expect(finished).to.deep.include({ ok: false, code: 'CANCELLED' });
    const bound = readLog(cluster.logDir).find(
      (e) => e.type === 'CallBound' && e.requestId === requestId,
    );
    const containerId = bound?.type === 'CallBound' ? bound.containerId : '';
    await eventually(
      () =>
        readLog(cluster.logDir).some(
          (e) =>
            e.type === 'ContainerStateChanged' &&
            e.containerId === containerId &&
            e.state === 'removed',
        ),
      'the worker to remove the cancelled call container',
      30_000,
    );
  });

  it('calls from the TypeScript client: a plain call and an exception', async () => {
    const client = new ReadieClient({
      address: cluster.address.replace('127.0.0.1', 'localhost'),
      caFile: join(ROOT, 'test', 'support', 'tls', 'ca.pem'),
      token: cluster.token,
    });
    try {
      expect(await client.call({ module: 'math', function: 'hypot', args: [3, 4] })).to.equal(5);
      const source =
        'def check(n):\n    if n < 0:\n        raise ValueError(f"negative: {n}")\n    return n\n';
      try {
        await client.call({ source, function: 'check', args: [-1] });
        expect.fail('the call should have raised');
      } catch (error) {
        expect(error).to.be.instanceOf(RemoteExecutionError);
        expect((error as RemoteExecutionError).remoteType).to.equal('ValueError');
        expect((error as Error).message).to.contain('negative: -1');
      }
    } finally {
      client.close();
    }
  });

  // Last: it kills a worker.
  it('answers SessionExpiredError for a session whose worker was killed', async () => {
    const client = spawn(PYTHON, [SCRIPT, 'session-then-expired'], {
      env: cluster.clientEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const lines = createInterface({ input: client.stdout });
    const [first] = (await once(lines, 'line')) as [string];
    const pinned = (JSON.parse(first) as { pinned: { worker: string } }).pinned;
    cluster.workers.get(pinned.worker)!.kill('SIGKILL');
    await eventually(
      () =>
        readLog(cluster.logDir).some(
          (e) => e.type === 'WorkerEvicted' && e.workerId === pinned.worker,
        ),
      'the router to evict the killed worker',
      30_000,
    );
    client.stdin.write('\n');
    const [last] = (await once(lines, 'line')) as [string];
    const result = JSON.parse(last) as { error: string; message: string };
    expect(result.error).to.equal('SessionExpiredError');
    expect(result.message).to.contain('session expired');
  });
});
