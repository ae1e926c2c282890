import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ClusterEvent } from '../../src/events/types.js';
import {
  CallCancelledError,
  ReadieClient,
  RemoteExecutionError,
  SessionExpiredError,
} from '../../src/client/index.js';
import { startE2eCluster, type E2eCluster } from '../support/e2e-cluster.js';
import { PYTHON } from '../support/python.js';
import { eventually, ofType, readLog } from '../support/router/harness.js';
import { ROOT } from '../support/replay.js';

const SCRIPT = join(ROOT, 'test', 'e2e', 'scripts', 'fanout.py');

describe('end to end: fan-out (fn.map, fn.spawn) on a real cluster', function () {
  this.timeout(180_000);
  let cluster: E2eCluster;

  before(async function () {
    this.timeout(180_000);
    cluster = await startE2eCluster();
  });

  after(async () => {
    await cluster?.stop();
  });

  /**
   * Clients dial the router itself (plaintext on loopback, as `npm start`'s clients do), not
   * nginx: through nginx about one session call in 3,000 reaches the worker without its payload
   * (a fault of that relay path, seen with plain session calls too, not of the fan-out).
   */
  const env = () =>
    cluster.clientEnv({
      READIE_ADDRESS: `127.0.0.1:${cluster.routerPort}`,
      READIE_INSECURE: '1',
      READIE_CA_FILE: '',
    });

  function python(scenario: string, ...args: string[]): Record<string, unknown> {
    const run = spawnSync(PYTHON, [SCRIPT, scenario, ...args], {
      env: env(),
      encoding: 'utf8',
      timeout: 170_000,
    });
    const last = run.stdout.trim().split('\n').at(-1) ?? '';
    if (run.status !== 0 || !last.startsWith('{')) {
      throw new Error(`fanout.py ${scenario} exited ${run.status}: ${run.stdout}\n${run.stderr}`);
    }
    return JSON.parse(last) as Record<string, unknown>;
  }

  const since = (seq: number) => readLog(cluster.logDir).filter((event) => event.seq > seq);
  const lastSeq = () => readLog(cluster.logDir).at(-1)?.seq ?? 0;
  const routerLog = () => join(cluster.dir, 'logs', 'router.log');
  const routerLogBytes = () => (existsSync(routerLog()) ? statSync(routerLog()).size : 0);
  /** The router's log lines written after its first `from` bytes, parsed. */
  const routerLogSince = (from: number): Record<string, unknown>[] =>
    readFileSync(routerLog())
      .subarray(from)
      .toString('utf8')
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  /**
   * Where each placed call and busy container went, and the last lines of each worker's log: what
   * a call placed but never started leaves to read (this wait timed out once under two suites).
   */
  const startDiagnosis = (events: readonly ClusterEvent[]): string => {
    const placed = ofType(events, 'CallPlaced').map(
      (event) => `${event.requestId} on ${event.workerId} (${event.checkpointId ?? 'cold'})`,
    );
    const states = ofType(events, 'ContainerStateChanged').map(
      (event) => `${event.workerId} ${event.containerId} ${event.state}`,
    );
    const logs = cluster.workers.size
      ? [...cluster.workers.keys()].map((workerId) => {
          const file = join(cluster.dir, 'logs', `${workerId}.log`);
          const lines = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
          return `--- ${workerId}.log (last 15 lines):\n${lines.slice(-15).join('\n')}`;
        })
      : [];
    return [`placed: ${placed.join('; ')}`, `containers: ${states.join('; ')}`, ...logs].join('\n');
  };
  /** The distinct containers among `containers` the log says were removed. */
  const removedOf = (events: ClusterEvent[], containers: ReadonlySet<string>) =>
    new Set(
      ofType(events, 'ContainerStateChanged')
        .filter((event) => event.state === 'removed' && containers.has(event.containerId))
        .map((event) => event.containerId),
    );

  it('returns every result of a map of 1,000 inputs in order, in a few batches on a few warm containers', async () => {
    const before = lastSeq();
    expect(python('ordered', '1000')).to.deep.equal({ ok: true, count: 1000 });
    const events = since(before);
    const bound = ofType(events, 'CallBound');
    // Batches: far fewer calls than inputs, each logged with its input count.
    const requested = ofType(events, 'CallRequested');
    expect(requested.reduce((sum, event) => sum + (event.inputs ?? 0), 0)).to.equal(1000);
    expect(bound.length).to.equal(requested.length).and.to.be.below(100);
    // One container per concurrency slot (at most the cluster's 16 slots), never one per input.
    const containers = new Set(bound.map((event) => event.containerId));
    expect(containers.size).to.be.within(1, 16);
    // Each slot's session was ended when the map ended, and its container destroyed at once.
    await eventually(
      () => removedOf(since(before), containers).size === containers.size,
      'every container of the map to be removed',
      20_000,
    );
    const ended = ofType(since(before), 'SessionEnded');
    expect(new Set(ended.map((event) => event.containerId))).to.deep.equal(containers);
    expect(ended.every((event) => event.tenantId === 'local')).to.be.true;
  });

  it('completes two maps that together ask for twice the cluster, with no error', () => {
    const before = lastSeq();
    const result = python('crowded', '40', '0.3') as Record<
      string,
      { count: number; errors: string[] }
    >;
    expect(result.a).to.deep.include({ count: 40, errors: [] });
    expect(result.b).to.deep.include({ count: 40, errors: [] });
    // The cluster had no room for every call: the calls beyond it waited in the router's
    // admission queue (on by default), none refused for lack of room and tried again.
    const events = since(before);
    expect(ofType(events, 'CallQueued').length, 'calls queued').to.be.greaterThan(0);
    const refused = ofType(events, 'CallRejected').filter(
      (event) => event.code === 'RESOURCE_EXHAUSTED',
    );
    expect(refused, 'refusals for lack of room').to.deep.equal([]);
  });

  it('keeps going past a failing input with return_exceptions=True, and names the index otherwise', () => {
    const result = python('exceptions', '10', '3');
    expect(result.values).to.deep.equal([0, 1, 2, null, 4, 5, 6, 7, 8, 9]);
    expect(result.failed).to.deep.equal([[3, 'RemoteExecutionError', 3, 'ValueError']]);
    expect(result.raised).to.deep.equal({
      index: 3,
      message: 'input 3: ValueError: input 3 is bad',
    });
  });

  it('draws a generator lazily: a few batches ahead of the results taken, not a million', () => {
    const before = lastSeq();
    const result = python('lazy', '5', '4');
    expect(result.results).to.deep.equal([0, 1, 4, 9, 16]);
    // A map draws at most two of its largest batches per slot ahead of the results handed out.
    // The batch being formed as the map stops may never reach the router (the map is closed
    // first), and a batch is at most 32 times the largest before it: the bound allows for it.
    const largest = Math.max(...ofType(since(before), 'CallRequested').map((e) => e.inputs ?? 1));
    expect(result.drawn).to.be.within(5, 5 + 2 * 4 * largest * 32);
    expect(result.drawn).to.be.below(1_000_000);
  });

  it('maps 100,000 trivial inputs in order, one failing input reported at its index, the rest intact', () => {
    const before = lastSeq();
    const result = python('many', '100000', '77777');
    expect(result).to.deep.include({
      count: 100_000,
      intact: true,
      failed: [[77777, 'RemoteExecutionError', 77777, 'ValueError']],
    });
    const events = since(before);
    const requested = ofType(events, 'CallRequested');
    expect(Math.max(...requested.map((event) => event.inputs ?? 0))).to.be.at.most(1024);
    // Every input was requested once, and no worker refused a batch the router placed: the
    // router counts a session's container until its worker reports it gone (placement rules 7),
    // so an admitted batch never meets a worker still counting the container of an ended one
    // (RESOURCE_EXHAUSTED "this worker already holds N containers", tried again).
    const refusedByWorker = ofType(events, 'CallFinished').filter(
      (event) => event.code === 'RESOURCE_EXHAUSTED',
    );
    expect(refusedByWorker.map((event) => event.message)).to.deep.equal([]);
    expect(requested.reduce((sum, event) => sum + (event.inputs ?? 0), 0)).to.equal(100_000);
  });

  it('a batch whose container is OOM-killed fails only the inputs it had not finished', async () => {
    const before = lastSeq();
    // Batches of 10, one at a time; input 4 allocates past its 256 MiB budget.
    const result = python('oom', '30', '4', '10') as { failed: unknown[]; values: unknown[] };
    expect(result.failed).to.deep.equal(
      [4, 5, 6, 7, 8, 9].map((i) => [i, 'RemoteOutOfMemoryError', i]),
    );
    expect(result.values).to.deep.equal(
      Array.from({ length: 30 }, (_, i) => (i >= 4 && i <= 9 ? null : i)),
    );
    // One batch, one call, ended RESOURCE_EXHAUSTED; its container is gone.
    const finished = ofType(since(before), 'CallFinished');
    const killed = finished.filter((event) => event.code === 'RESOURCE_EXHAUSTED');
    expect(killed).to.have.length(1);
    const bound = ofType(since(before), 'CallBound').find(
      (event) => event.requestId === killed[0]!.requestId,
    );
    await eventually(
      () => removedOf(since(before), new Set([bound!.containerId])).size === 1,
      'the killed container to be removed',
      20_000,
    );
  });

  it('reuses containers within a map, not across maps; isolate_inputs=True uses one per input', () => {
    const result = python('reuse', '40', '4') as {
      inOrder: boolean;
      first: string[];
      second: string[];
      isolated: string[];
    };
    expect(result.inOrder).to.be.true;
    expect(result.first.length).to.be.within(1, 4);
    expect(result.second.length).to.be.within(1, 4);
    expect(result.first.filter((token) => result.second.includes(token))).to.deep.equal([]);
    expect(result.isolated).to.have.length(10);
  });

  it('spawns calls: get, a timeout that leaves the call running, cancel, gather', () => {
    expect(python('spawn')).to.deep.equal({
      quick: 49,
      quickDone: true,
      cancelled: true,
      afterCancel: 'CallCancelledError',
      slowDone: true,
      timeout: 'TimeoutError',
      gathered: Array.from({ length: 20 }, (_, x) => x * x),
    });
  });

  it('runs a map on asyncio, in order and as completed', () => {
    expect(python('aio', '50')).to.deep.equal({ ordered: true, unordered: true });
  });

  it('ends a session when its with-block ends: its container goes, its ID is refused', async () => {
    const before = lastSeq();
    const result = python('session');
    expect(result).to.deep.include({ same: true, after: 'SessionExpiredError' });
    const ended = ofType(since(before), 'SessionEnded').find((e) => e.sessionId === result.session);
    expect(ended?.containerId).to.be.a('string');
    await eventually(
      () =>
        ofType(since(before), 'ContainerStateChanged').some(
          (event) => event.containerId === ended?.containerId && event.state === 'removed',
        ),
      'the ended session container to be removed',
      20_000,
    );
  });

  it('maps, spawns and closes sessions from the TypeScript client', async () => {
    const client = new ReadieClient({
      address: `127.0.0.1:${cluster.routerPort}`,
      insecure: true,
      token: cluster.token,
    });
    const source =
      'def check(n):\n    if n == 7:\n        raise ValueError(f"bad: {n}")\n    return n * 2\n';
    try {
      const before = lastSeq();
      const inputs = Array.from({ length: 200 }, (_, n) => n);
      const results: unknown[] = [];
      for await (const result of client.map({ source, function: 'check' }, inputs, {
        returnExceptions: true,
        progress: false,
      })) {
        results.push(result);
      }
      expect(results.filter((r) => typeof r === 'number')).to.deep.equal(
        inputs.filter((n) => n !== 7).map((n) => n * 2),
      );
      // The last batch ended before its events committed: wait for every input's on disk.
      const requestedInputs = () =>
        ofType(since(before), 'CallRequested').reduce((sum, e) => sum + (e.inputs ?? 0), 0);
      await eventually(() => requestedInputs() >= 200, 'the 200 inputs requested on disk');
      // In batches: one call carried many of the 200 inputs.
      const batches = ofType(since(before), 'CallRequested');
      expect(batches.reduce((sum, event) => sum + (event.inputs ?? 0), 0)).to.equal(200);
      expect(batches.length).to.be.below(100);
      const failed = results[7] as RemoteExecutionError;
      expect(failed).to.be.instanceOf(RemoteExecutionError);
      expect(failed.inputIndex).to.equal(7);
      expect(failed.message).to.match(/^input 7: /);
      // Without returnExceptions the map rejects at the failing input.
      const taken: unknown[] = [];
      const failing = (async () => {
        for await (const result of client.map({ source, function: 'check' }, inputs.slice(0, 10), {
          progress: false,
        })) {
          taken.push(result);
        }
      })();
      const error = await failing.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect((error as RemoteExecutionError).inputIndex).to.equal(7);
      expect(taken).to.deep.equal([0, 2, 4, 6, 8, 10, 12]);
      const bound = ofType(since(before), 'CallBound');
      expect(new Set(bound.map((e) => e.containerId)).size).to.be.below(40);

      // Spawned calls: a result, and a cancel that reaches the cluster.
      const nap = {
        source: 'import time\ndef nap(s):\n    time.sleep(s)\n    return s\n',
        function: 'nap',
      };
      const quick = client.spawn<number>({ ...nap, args: [0] });
      const slow = client.spawn<number>({ ...nap, args: [60] });
      expect(await quick.get()).to.equal(0);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(slow.cancel()).to.be.true;
      expect(await slow.result.catch((reason: unknown) => reason)).to.be.instanceOf(
        CallCancelledError,
      );
      expect(slow.done).to.be.true;

      // A session closed: its container goes and its calls are refused.
      const session = client.session();
      await session.call({ source, function: 'check', args: [1] });
      expect(await session.close()).to.be.true;
      const refused = await session
        .call({ source, function: 'check', args: [1] })
        .catch((reason: unknown) => reason);
      expect(refused).to.be.instanceOf(SessionExpiredError);
    } finally {
      client.close();
    }
  });

  it('Ctrl-C mid-map cancels every batch on the workers, those of many inputs too', async () => {
    const before = lastSeq();
    const routerLogAt = routerLogBytes();
    // 200 inputs of 0.5 s in batches of 10 on 4 slots: every batch in flight holds many inputs.
    const client = spawn(PYTHON, [SCRIPT, 'interrupted', '200', '0.5', '4', '10'], {
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const leftover = () =>
      client.exitCode === null && client.signalCode === null && client.kill('SIGKILL');
    let stdout = '';
    let stderr = '';
    client.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    client.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    try {
      // Not as the first result is printed: the script is then in its own loop body, where a
      // Ctrl-C is the caller's bare KeyboardInterrupt (the map's generator, closed by it, cancels
      // its batches but cannot word the interrupt). Once it says it waits inside the map again.
      await eventually(
        () => stdout.includes('back in the map'),
        'the script waiting inside the map after its first result',
        60_000,
      );
      const exited = once(client, 'exit');
      client.kill('SIGINT');
      const [code] = (await exited) as [number | null];
      expect(code, stderr).to.equal(0);
      const answer = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
        interrupted: boolean;
        message: string;
      };
      expect(answer.interrupted).to.equal(true);
      // A slot's next batch may wait for its session's turn behind the one that runs (sent once
      // the map measured a few inputs): four calls in flight, or up to eight.
      const inFlight =
        /^the map of nap was stopped: \d+ of 200 inputs completed, (\d+) calls in flight cancelled$/.exec(
          answer.message,
        );
      expect(inFlight, answer.message).to.not.equal(null);
      const cancelledCalls = Number(inFlight?.[1]);
      expect(cancelledCalls).to.be.within(4, 8);
      // Every batch the router placed either finished or was cancelled on its worker (one the
      // router refused for lack of room, under load, ends there: the map tried it again); the
      // ones cancelled carried several inputs.
      const requested = ofType(since(before), 'CallRequested');
      const ended = () =>
        new Set(
          [...ofType(since(before), 'CallFinished'), ...ofType(since(before), 'CallRejected')].map(
            (event) => event.requestId,
          ),
        );
      await eventually(
        () => {
          const done = ended();
          return requested.every((call) => done.has(call.requestId));
        },
        'every batch to end',
        20_000,
      );
      const cancelled = ofType(since(before), 'CallFinished').filter(
        (event) => event.code === 'CANCELLED',
      );
      // A next batch the client cancelled while it still waited for its session's turn never
      // reached the event log: the router's own log names it, refused CANCELLED. Together with
      // the batches cancelled on their workers, they are the calls the client cancelled.
      const leftInLine = () => {
        const logged = new Set(ofType(since(before), 'CallRequested').map((e) => e.requestId));
        return routerLogSince(routerLogAt).filter(
          (line) =>
            line.msg === 'call refused' &&
            line.code === 'CANCELLED' &&
            typeof line.requestId === 'string' &&
            !logged.has(line.requestId),
        ).length;
      };
      // The router writes its log as it goes: wait for the lines, then say what is missing.
      await eventually(
        () => cancelled.length + leftInLine() === cancelledCalls,
        'the router to log the calls that left while waiting for their turn',
        10_000,
      ).catch(() => undefined);
      expect(cancelled.length + leftInLine(), answer.message).to.equal(cancelledCalls);
      expect(cancelled.length).to.be.at.least(4);
      for (const call of cancelled) {
        const batch = requested.find((event) => event.requestId === call.requestId);
        expect(batch?.inputs).to.equal(10);
      }
      // The workers stopped the work: every container the map used is gone.
      const containers = new Set(
        ofType(since(before), 'ContainerStateChanged')
          .filter((event) => event.state === 'busy')
          .map((event) => event.containerId),
      );
      // One container per call at most: a next batch whose session's turn came as the one ahead
      // of it was cancelled (its own cancellation on its way) starts in a new one.
      expect(containers.size).to.be.within(1, cancelledCalls);
      await eventually(
        () => removedOf(since(before), containers).size === containers.size,
        'the containers of the map to be removed',
        30_000,
      );
    } finally {
      leftover();
    }
  });

  it('Ctrl-C (SIGINT) cancels the calls in flight on the workers and reports how many completed', async () => {
    // The script waits until four calls fit before it maps (the map opens no more than fit as it
    // starts): an earlier test's sessions may still be ending under load.
    const before = lastSeq();
    // One input per call (chunk_size=1): four calls in flight whatever the adaptive chunking
    // would make of eight inputs on a cluster whose slots an earlier test is still freeing.
    const client = spawn(PYTHON, [SCRIPT, 'interrupted', '8', '120', '4', '1'], {
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // A failure below must not leave the client running its map (mocha would wait for it).
    const leftover = () =>
      client.exitCode === null && client.signalCode === null && client.kill('SIGKILL');
    let stdout = '';
    let stderr = '';
    client.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    client.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    try {
      await once(createInterface({ input: client.stdout }), 'line');
      // Running: placed, and their containers busy (a call that prints nothing is bound only when
      // it answers, so the log has no CallBound yet).
      const busy = () =>
        ofType(since(before), 'ContainerStateChanged').filter((event) => event.state === 'busy');
      await eventually(
        () => ofType(since(before), 'CallPlaced').length >= 4 && busy().length >= 4,
        () =>
          `the four calls to start (requested ${ofType(since(before), 'CallRequested').length}, ` +
          `placed ${ofType(since(before), 'CallPlaced').length}, refused ` +
          `${ofType(since(before), 'CallRejected').length}, busy ${busy().length})\n` +
          startDiagnosis(since(before)),
        60_000,
      );
      const placed = ofType(since(before), 'CallPlaced');
      const containers = new Set(busy().map((event) => event.containerId));
      const exited = once(client, 'exit');
      client.kill('SIGINT');
      const [code] = (await exited) as [number | null];
      expect(code, stderr).to.equal(0);
      const answer = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<
        string,
        unknown
      >;
      expect(answer).to.deep.equal({
        interrupted: true,
        message: 'the map of nap was stopped: 0 of 8 inputs completed, 4 calls in flight cancelled',
      });
      expect(stderr).to.include('[readie] the map of nap was stopped');
      await eventually(
        () =>
          placed.every((call) =>
            ofType(since(before), 'CallFinished').some(
              (event) => event.requestId === call.requestId && event.code === 'CANCELLED',
            ),
          ),
        'the router to cancel the four calls',
        20_000,
      );
      // The workers stopped the work: every container of those calls is gone.
      await eventually(
        () => removedOf(since(before), containers).size === containers.size,
        'the cancelled calls containers to be removed',
        30_000,
      );
    } finally {
      leftover();
    }
  });
});
