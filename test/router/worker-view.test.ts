/**
 * The router's view of its workers over real gRPC on loopback, with scripted workers: only probes
 * evict an unreachable worker (however often it reports) and calls go around it meanwhile; a
 * worker full by its own count is not placed on; a session's checkpoint is what its worker
 * reported; worker processes with one ID are told apart.
 */
import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { freePort } from '../support/e2e-cluster.js';
import {
  codeOf,
  eventually,
  readLog,
  run,
  startTestRouter,
  storyOf,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: its view of the workers (scripted workers)', function () {
  this.timeout(60_000);
  let test: TestRouter | undefined;
  const workers: ScriptedWorker[] = [];
  const timers: NodeJS.Timeout[] = [];

  async function worker(
    workerId: string,
    router: TestRouter,
    options: Omit<Parameters<typeof ScriptedWorker.start>[0], 'workerId'> = {},
  ): Promise<ScriptedWorker> {
    const started = await ScriptedWorker.start({ workerId, ...options });
    workers.push(started);
    await started.connect(router.address).reportStatus();
    return started;
  }

  afterEach(async () => {
    for (const timer of timers.splice(0)) clearInterval(timer);
    for (const started of workers.splice(0)) started.stop();
    await test?.close();
    test = undefined;
    cleanTempDirs();
  });

  it('evicts a worker it cannot reach within PROBE_FAILURE_THRESHOLD x PROBE_INTERVAL however often it reports', async () => {
    const interval = 300;
    test = await startTestRouter({
      config: { PROBE_INTERVAL: interval, PROBE_TIMEOUT: 500, PROBE_FAILURE_THRESHOLD: 3 },
    });
    const router = test;
    // A wrong --advertise: the worker reaches the router, the router never reaches it.
    const bad = await worker('a-bad', router, { advertise: `127.0.0.1:${await freePort()}` });
    const registeredAt = performance.now();
    // It reports three times per probe interval (a worker reporting every 10 s against 5 s probes
    // reported between every other pair of probes, and that reset the count for ever).
    timers.push(setInterval(() => void bad.reportUtilization().catch(() => undefined), 100));
    await eventually(
      () => router.router.state.workers.get('a-bad')?.status === 'evicted',
      'the unreachable worker to be evicted',
      10_000,
    );
    expect(
      performance.now() - registeredAt,
      'within threshold x interval, and a probe',
    ).to.be.below(3 * interval + 1_500);
    expect(router.router.state.workers.get('a-bad')?.evictedReason).to.equal('probe');
    await router.close();
    const events = readLog(router.logDir);
    const failed = events.filter(
      (event): event is Extract<typeof event, { type: 'WorkerProbeFailed' }> =>
        event.type === 'WorkerProbeFailed' && event.workerId === 'a-bad',
    );
    expect(
      failed.map((event) => event.consecutive),
      'reports in between never restart the count',
    ).to.deep.equal([1, 2, 3]);
    const between = events.slice(events.indexOf(failed[0]!), events.indexOf(failed[2]!));
    expect(
      between.some((event) => event.type === 'WorkerUtilization' && event.workerId === 'a-bad'),
      'it reported between the failures',
    ).to.equal(true);
  });

  it('sends calls to the healthy workers while one it cannot reach is still registered', async () => {
    test = await startTestRouter();
    const router = test;
    const bad = await worker('a-bad', router, { advertise: `127.0.0.1:${await freePort()}` });
    timers.push(setInterval(() => void bad.reportUtilization().catch(() => undefined), 100));
    await worker('b-ok', router);
    await worker('c-ok', router);
    const outcomes = [];
    for (let i = 0; i < 6; i += 1) outcomes.push(await run(router.client, 'echo'));
    expect(outcomes.map(codeOf), 'every call succeeds').to.deep.equal(new Array(6).fill('OK'));
    for (const outcome of outcomes) {
      expect(outcome.ids.at(-1)?.workerId).to.be.oneOf(['b-ok', 'c-ok']);
    }
    // Each failed dial counted as a failed probe: three evicted it.
    expect(router.router.state.workers.get('a-bad')).to.deep.include({
      status: 'evicted',
      evictedReason: 'probe',
    });
  });

  it('a worker full by its own report (no container records) is not placed on', async () => {
    // No queue: the refusal names what placement saw (a queued call would wait with these words).
    test = await startTestRouter({ config: { QUEUE_TIMEOUT: 0 } });
    const full = await worker('a-full', test);
    await full.reportStatus({ maxContainers: 2 });
    await worker('b-room', test);
    expect(await full.reportUtilization({ containerCount: 2 })).to.equal(true);
    const outcome = await run(test.client, 'echo'); // a-full sorts first
    expect(codeOf(outcome)).to.equal('OK');
    expect(outcome.ids.at(-1)?.workerId).to.equal('b-room');
    expect(full.calls, 'nothing reached the full worker').to.have.length(0);
    // Alone, it is refused: full by its own count.
    await workers.find((w) => w.workerId === 'b-room')!.reportStatus({ status: 3 });
    const refused = await run(test.client, 'echo');
    expect(codeOf(refused)).to.equal('RESOURCE_EXHAUSTED');
    expect(refused.error?.details).to.match(/container-count ruled out 1/);
  });

  it('refuses disable_optimized_execution in a session whose container its worker reported restored, though the answer named no checkpoint', async () => {
    test = await startTestRouter();
    // The worker's answers name no checkpoint; its container report does.
    const w = await worker('w1', test, { checkpointUsed: () => '' });
    const first = await run(test.client, 'echo', { sessionId: 's-ckpt' });
    expect(codeOf(first)).to.equal('OK');
    const containerId = first.ids.at(-1)?.containerId as string;
    expect(first.ids.at(-1)?.checkpointId).to.equal('');
    await w.reportContainer(containerId, ContainerState.CONTAINER_STATE_READY, 'checkpoint_0');
    const cold = await run(test.client, 'echo', {
      sessionId: 's-ckpt',
      disableOptimizedExecution: true,
    });
    expect(codeOf(cold)).to.equal('FAILED_PRECONDITION');
    expect(cold.error?.details).to.match(/restored from checkpoint "checkpoint_0"/);
    expect(w.calls, 'the refused call never reached the worker').to.have.length(1);
  });

  describe('worker identity', () => {
    it('refuses a second live instance of a worker ID at another address, naming the holder; the holder keeps working', async () => {
      // Long enough for a loaded machine to connect to a live worker (500 ms was not: a call was
      // refused UNAVAILABLE); a stopped one refuses the connection at once.
      test = await startTestRouter({ config: { PROBE_TIMEOUT: 5_000 } });
      const holder = await worker('w1', test, { instanceId: 'i-holder' });
      const second = await ScriptedWorker.start({ workerId: 'w1', instanceId: 'i-second' });
      workers.push(second);
      const refusal = await second
        .connect(test.address)
        .reportStatus()
        .then(
          () => undefined,
          (error: { code: number; details: string }) => error,
        );
      expect(refusal?.code).to.equal(status.ALREADY_EXISTS);
      expect(refusal?.details).to.equal(
        `worker ID "w1" is held by another live worker at ${holder.address} (instance i-holder): stop that worker, or start this one with another --id`,
      );
      // Its reports and its REMOVED change nothing.
      expect(await second.reportUtilization({ memoryUsed: 5 })).to.equal(false);
      await second.reportStatus({ status: 3 });
      const w1 = test.router.state.workers.get('w1')!;
      expect(w1).to.deep.include({
        status: 'ready',
        address: holder.address,
        instanceId: 'i-holder',
      });
      expect(w1.utilization).to.equal(null);
      expect(codeOf(await run(test.client, 'echo'))).to.equal('OK');
      expect(holder.calls).to.have.length(1);
    });

    it('takes a new instance whose holder no longer answers, or at the same address, as a restart: the old containers and sessions end', async () => {
      test = await startTestRouter({ config: { PROBE_TIMEOUT: 5_000 } });
      const router = test;
      const old = await worker('w1', router, { instanceId: 'i-old' });
      const pinned = await run(router.client, 'echo', { sessionId: 's-old' });
      expect(codeOf(pinned)).to.equal('OK');
      old.stop();
      const next = await worker('w1', router, { instanceId: 'i-new' });
      const w1 = router.router.state.workers.get('w1')!;
      expect(w1).to.deep.include({ status: 'ready', address: next.address, instanceId: 'i-new' });
      expect(router.router.state.sessions.get('s-old')?.expired?.reason).to.equal('worker_evicted');
      // The same address again (a restart in place) needs no probe.
      const again = await ScriptedWorker.start({ workerId: 'w1', instanceId: 'i-again' });
      workers.push(again);
      await again.connect(router.address).reportStatus({ address: next.address });
      expect(router.router.state.workers.get('w1')?.instanceId).to.equal('i-again');
      await router.close();
      const events = readLog(router.logDir);
      expect(
        events
          .filter((event) => event.type === 'WorkerEvicted')
          .map((event) => [event.workerId, event.reason, event.cause]),
      ).to.deep.equal([
        ['w1', 'restarted', 'report:w1'],
        ['w1', 'restarted', 'report:w1'],
      ]);
    });
  });

  it('places a call again when its worker cannot be dialed, and the log tells each attempt', async () => {
    test = await startTestRouter();
    const nowhere = `127.0.0.1:${await freePort()}`;
    await worker('a-nowhere', test, { advertise: nowhere });
    const ok = await worker('b-ok', test);
    const outcome = await run(test.client, 'echo', { requestId: 'r-around' });
    expect(codeOf(outcome)).to.equal('OK');
    expect(ok.calls).to.have.length(1);
    await test.router.close();
    const events = readLog(test.logDir);
    expect(storyOf(events, 'r-around')).to.deep.equal([
      'CallRequested',
      'CallPlaced',
      'CallDialFailed',
      'CallPlaced',
      'CallBound',
      'CallFinished',
    ]);
    const failed = events.find((event) => event.type === 'CallDialFailed')!;
    expect(failed).to.deep.include({ workerId: 'a-nowhere', cause: 'dial:r-around' });
    expect(failed.type === 'CallDialFailed' && failed.error).to.match(
      new RegExp(`could not connect to ${nowhere}.*ECONNREFUSED`),
    );
  });
});
