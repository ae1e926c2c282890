/**
 * The router's view of its workers against real workers (real containers, cgroups and Python
 * executors, as root): capacity counted as the workers count it, a view that converges after the
 * router dies or stops with calls in flight, and a duplicate worker ID refused.
 */
import { expect } from 'chai';
import { join } from 'node:path';
import type { ClusterEvent } from '../../src/events/types.js';
import { fold } from '../../src/projections/index.js';
import { ResourceExhaustedError } from '../../src/client/index.js';
import { freePort } from '../support/e2e-cluster.js';
import { PYTHON } from '../support/python.js';
import { recordFullReports } from '../support/worker-harness.js';
import {
  plainClient,
  SLEEP_SOURCE,
  startRealWorker,
  type RealWorker,
} from '../support/real-worker.js';
import {
  eventually,
  readLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { runReadie, type Child } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** `readie router` as a child on `port` over the log at `logDir`; resolves once it serves. */
async function childRouter(logDir: string, port: number): Promise<Child> {
  const child = runReadie(
    [
      'router',
      '--listen',
      `127.0.0.1:${port}`,
      '--log',
      logDir,
      '--insecure',
      '--auth',
      'none',
      '--probe-interval',
      '1h',
    ],
    { REAPER_INTERVAL: '1h', LOG_LEVEL: 'info' },
  );
  await child.waitFor(/"msg":"router serving"/, 60_000);
  return child;
}

const nap = (seconds: number) => ({ source: SLEEP_SOURCE, function: 'nap', args: [seconds] });

describe('the router counts container slots as its workers do (real workers)', function () {
  this.timeout(240_000);
  let router: TestRouter | undefined;
  const workers: RealWorker[] = [];

  after(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop()));
    await router?.close();
    cleanTempDirs();
  });

  it('runs 16 concurrent calls on two 8-container workers, and 16 more right after', async () => {
    // No queue: the 17th call's refusal shows what the router counted (queued, it would wait).
    router = await startTestRouter({ config: { QUEUE_TIMEOUT: 0 } });
    for (let i = 0; i < 2; i += 1) {
      workers.push(await startRealWorker(router.address, { flags: { maxContainers: '8' } }));
    }
    const test = router;
    await eventually(() => test.router.state.workers.size === 2, 'both workers registered');
    const client = plainClient(router.address);
    try {
      for (const round of ['first', 'second']) {
        // Each call sleeps, so all 16 hold their slot at once.
        const calls = Array.from({ length: 16 }, () => client.call(nap(1.5)));
        const results = await Promise.allSettled(calls);
        const failed = results.filter(
          (result): result is PromiseRejectedResult => result.status === 'rejected',
        );
        expect(
          failed.map((result) => String(result.reason)),
          `${round} round: every call ran`,
        ).to.deep.equal([]);
        expect(results.map((result) => (result as PromiseFulfilledResult<unknown>).value)).to.eql(
          new Array<string>(16).fill('slept'),
        );
      }
      // Slots are really full at 16: a 17th call among 16 running is refused by the router.
      const running = Array.from({ length: 16 }, () => client.call(nap(3)));
      await eventually(
        () => workers.every((worker) => worker.worker.pool?.count === 8),
        'every slot held',
        30_000,
      );
      let refusal: unknown;
      await client.call(nap(0)).catch((error: unknown) => (refusal = error));
      expect(refusal).to.be.instanceOf(ResourceExhaustedError);
      expect(String(refusal)).to.match(/container-count ruled out 2/);
      await Promise.all(running);
    } finally {
      client.close();
    }
  });
});

describe("the router's view converges after it dies or stops with calls in flight (real worker)", function () {
  this.timeout(240_000);
  let worker: RealWorker | undefined;
  let router: Child | undefined;

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    router?.process.kill('SIGKILL');
    await router?.exited;
    router = undefined;
    cleanTempDirs();
  });

  for (const how of ['SIGKILL', 'SIGTERM'] as const) {
    it(`after a ${how === 'SIGKILL' ? 'SIGKILL' : 'clean stop (SIGTERM, the calls drained)'}: its view equals the worker's with the first full report after the restart`, async () => {
      const logDir = tempDir('rv-log-');
      const port = await freePort();
      const address = `127.0.0.1:${port}`;
      router = await childRouter(logDir, port);
      worker = await startRealWorker(address, {
        flags: { maxContainers: '2' },
        env: { WORKER_UTILIZATION_INTERVAL: '1s' },
      });
      const pool = worker.worker.pool!;
      const before = plainClient(address);
      // Two calls hold both slots when the router goes.
      const seconds = how === 'SIGKILL' ? 20 : 1;
      const inFlight = [before.call(nap(seconds)), before.call(nap(seconds))];
      const settled = Promise.allSettled(inFlight);
      await eventually(() => pool.held().length === 2, 'both calls running', 30_000);
      const running = performance.now();
      const busy = pool.held().map((container) => container.containerId);
      expect(busy).to.have.length(2);
      // The router has recorded both (the worker reports a new container a moment after it starts).
      await eventually(
        () => {
          const seen = fold(readLog(logDir)).workers.get(worker!.workerId);
          return busy.every((containerId) => seen?.containers.get(containerId)?.state === 'busy');
        },
        'the router to record both containers busy',
        30_000,
      );
      router.process.kill(how);
      const outcomes = await settled;
      expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(
        how === 'SIGKILL' ? ['rejected', 'rejected'] : ['fulfilled', 'fulfilled'],
      );
      await router.exited;
      before.close();
      // Nobody can receive the answers of calls whose router died: the worker cancels them and
      // destroys their containers at once, long before their 20 s are up. Its reports of
      // that are lost while the router is down.
      await eventually(() => pool.count === 0, 'the worker to destroy both containers', 30_000);
      if (how === 'SIGKILL') {
        expect(performance.now() - running, 'cancelled, not run to their end').to.be.below(
          seconds * 1_000,
        );
        const stale = fold(readLog(logDir)).workers.get(worker.workerId)!;
        expect(
          busy.map((containerId) => stale.containers.get(containerId)?.state),
          'the log still holds them busy',
        ).to.deep.equal(['busy', 'busy']);
      }

      const taken = recordFullReports(worker.worker);
      router = await childRouter(logDir, port);
      const back = performance.now();
      // The first full report the worker takes once the router serves again (200 ms allowed
      // for the restart to be seen) reaches it, and the router's view is the worker's from it on
      // (nothing runs meanwhile, so nothing a later report told of can differ).
      await eventually(
        () => taken.some((report) => report.at > back + 200),
        'a full report after the restart',
        10_000,
      );
      const first = taken.find((report) => report.at > back + 200)!;
      const heard = () =>
        readLog(logDir).find(
          (event): event is Extract<ClusterEvent, { type: 'WorkerUtilization' }> =>
            event.type === 'WorkerUtilization' &&
            event.workerId === worker!.workerId &&
            event.reportSeq !== null &&
            event.reportSeq >= first.reportSeq,
        );
      await eventually(() => heard() !== undefined, 'a full report to reach the router', 15_000);
      const events = readLog(logDir);
      const report = heard()!;
      expect(report.reportSeq, 'the first full report after the restart').to.equal(first.reportSeq);
      const view = fold(events.filter((event) => event.seq <= report.seq)).workers.get(
        worker.workerId,
      )!;
      expect(first.containerIds, "the worker's view: it holds nothing").to.deep.equal([]);
      expect([...view.containers.keys()].sort(), "the router's view").to.deep.equal(
        first.containerIds,
      );
      // And the restarted router places on both slots again.
      const after = plainClient(address);
      try {
        const results = await Promise.all([after.call(nap(0)), after.call(nap(0))]);
        expect(results).to.deep.equal(['slept', 'slept']);
      } finally {
        after.close();
      }
      const dropped = events.filter(
        (event) =>
          event.type === 'ContainerStateChanged' &&
          event.state === 'removed' &&
          busy.includes(event.containerId),
      );
      if (how === 'SIGKILL') {
        // Only the new router's reconciliation can have dropped them (after a clean stop, a
        // removal may still have reached the old router while it drained).
        expect(dropped.map((event) => event.cause)).to.deep.equal(
          busy.map(() => `report:${worker!.workerId}`),
        );
      }
    });
  }
});

/** `readie worker` as a child with `args` after the common flags. */
function childWorker(router: string, workerId: string, extra: readonly string[]): Child {
  return runReadie([
    'worker',
    '--router',
    router,
    '--listen',
    '127.0.0.1:0',
    '--id',
    workerId,
    '--state-dir',
    join(tempDir('rv-dup-'), 'state'),
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
    ...extra,
  ]);
}

/** Resolves with how `child` exited, or `'running'` after `ms`. */
function exitWithin(child: Child, ms: number) {
  return Promise.race([
    child.exited,
    new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), ms)),
  ]);
}

describe('a worker ID held by a live worker (real workers)', function () {
  this.timeout(240_000);
  let router: TestRouter;
  let original: RealWorker;

  before(async () => {
    router = await startTestRouter();
    original = await startRealWorker(router.address, { id: `dup-${process.pid}` });
  });

  after(async () => {
    await original?.stop();
    await router?.close();
    cleanTempDirs();
  });

  it('a duplicate on another machine (its own cgroup) is refused ALREADY_EXISTS naming the holder, exits, and the original keeps working', async () => {
    const holder = router.router.state.workers.get(original.workerId)!;
    expect(holder.instanceId).to.equal(original.worker.instanceId);
    const duplicate = childWorker(router.address, original.workerId, [
      '--cgroup-parent',
      `readie/${original.workerId}-elsewhere`,
    ]);
    expect(await exitWithin(duplicate, 120_000), 'the duplicate exits').to.deep.equal({
      code: 1,
      signal: null,
    });
    expect(duplicate.stderr()).to.contain(
      `worker ID "${original.workerId}" is held by another live worker at ${original.worker.address}`,
    );
    expect(router.router.state.workers.get(original.workerId)).to.deep.include({
      status: 'ready',
      address: original.worker.address,
      instanceId: original.worker.instanceId,
    });
    const client = plainClient(router.address);
    try {
      expect(await client.call(nap(0))).to.equal('slept');
    } finally {
      client.close();
    }
    const events = readLog(router.logDir);
    expect(events.filter((event) => event.type === 'WorkerLeaving')).to.deep.equal([]);
    expect(
      events.filter((event) => event.type === 'WorkerRegistered').map((e) => e.address),
      'registered once, by the original',
    ).to.deep.equal([original.worker.address]);
  });

  it('a duplicate on the same machine given the parent cgroup the original uses stops before it touches it', async () => {
    const client = plainClient(router.address);
    try {
      const session = client.session();
      expect(await session.call(nap(0))).to.equal('slept');
      // Its own state directory would give it its own parent cgroup: name the original's.
      const duplicate = childWorker(router.address, original.workerId, [
        '--cgroup-parent',
        original.worker.options.cgroupParent,
      ]);
      // Exit 2: what the operator configured is in use, as a port in use is.
      expect(await exitWithin(duplicate, 120_000)).to.deep.equal({ code: 2, signal: null });
      expect(duplicate.stderr()).to.match(
        /another worker process \(pid \d+\) uses the parent cgroup readie\/dup-/,
      );
      // The session's container survived: its next call runs in it.
      expect(await session.call(nap(0))).to.equal('slept');
      expect(original.worker.pool?.held()).to.have.length(1);
    } finally {
      client.close();
    }
  });
});
