import { expect } from 'chai';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import {
  codeOf,
  eventually,
  foldLog,
  readLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: worker liveness', function () {
  this.timeout(60_000);
  let test: TestRouter | undefined;
  const workers: ScriptedWorker[] = [];

  async function worker(workerId: string, router: TestRouter): Promise<ScriptedWorker> {
    const started = await ScriptedWorker.start({ workerId });
    workers.push(started);
    await started.connect(router.address).reportStatus();
    return started;
  }

  afterEach(async () => {
    for (const started of workers.splice(0)) started.stop();
    await test?.close();
    if (test) expect(foldLog(test.logDir).reservations.size).to.equal(0);
    cleanTempDirs();
  });

  for (const failure of ['NOT_SERVING', 'stopped'] as const) {
    it(`evicts a worker after PROBE_FAILURE_THRESHOLD failed probes (${failure}), expiring its sessions`, async () => {
      test = await startTestRouter({
        config: { PROBE_INTERVAL: 100, PROBE_TIMEOUT: 500, PROBE_FAILURE_THRESHOLD: 3 },
      });
      const router = test;
      const w = await worker('w1', router);
      const pinned = await run(router.client, 'echo', { sessionId: 's1' });
      expect(codeOf(pinned)).to.equal('OK');
      // Healthy probes change nothing.
      await new Promise((resolve) => setTimeout(resolve, 350));
      expect(router.router.state.workers.get('w1')?.status).to.equal('ready');

      if (failure === 'NOT_SERVING') w.setServing(false);
      else w.stop();
      await eventually(
        () => router.router.state.workers.get('w1')?.status === 'evicted',
        'the probes to evict w1',
      );
      expect(router.router.state.workers.get('w1')?.evictedReason).to.equal('probe');
      const later = await run(router.client, 'echo', { sessionId: 's1' });
      expect(codeOf(later)).to.equal('NOT_FOUND');
      expect(later.error?.details).to.match(/session expired: .*worker_evicted/);

      await router.close();
      const events = readLog(router.logDir);
      const failed = events.filter((event) => event.type === 'WorkerProbeFailed');
      expect(failed.map((event) => event.consecutive)).to.deep.equal([1, 2, 3]);
      const evicted = events.findIndex((event) => event.type === 'WorkerEvicted');
      expect(events[evicted]).to.include({ workerId: 'w1', reason: 'probe' });
      expect(events[evicted + 1]).to.include({
        type: 'SessionExpired',
        sessionId: 's1',
        reason: 'worker_evicted',
      });
      expect(
        events.filter((event) => event.type === 'WorkerEvicted'),
        'evicted once',
      ).to.have.length(1);
    });
  }

  it('a worker answering probes again restarts the count', async () => {
    test = await startTestRouter({ config: { PROBE_FAILURE_THRESHOLD: 3 } });
    const w = await worker('w1', test);
    w.setServing(false);
    for (const expected of [1, 2]) {
      await test.router.probeNow();
      expect(test.router.state.workers.get('w1')?.probeFailures).to.equal(expected);
    }
    w.setServing(true);
    await test.router.probeNow();
    w.setServing(false);
    await test.router.probeNow();
    expect(test.router.state.workers.get('w1')?.probeFailures, 'restarted at 1').to.equal(1);
    expect(test.router.state.workers.get('w1')?.status).to.equal('ready');
  });

  it('the reaper forgets an idle container its worker never reported removed, then evicts a silent worker (timers shortened)', async () => {
    test = await startTestRouter({
      config: {
        REAPER_INTERVAL: 100,
        EXECUTOR_TTL: 400,
        WORKER_UTILIZATION_INTERVAL: 200,
        WORKER_TTL: 4_000,
      },
    });
    const router = test;
    const w = await worker('w1', router);
    const first = await run(router.client, 'echo', { sessionId: 's-idle' });
    const containerId = first.ids.at(-1)?.containerId as string;
    await w.reportContainer(containerId, ContainerState.CONTAINER_STATE_READY);
    await eventually(
      () => router.router.state.sessions.get('s-idle')?.expired !== null,
      'the idle container to be forgotten',
    );
    expect(router.router.state.sessions.get('s-idle')?.expired?.reason).to.equal(
      'container_forgotten',
    );
    const later = await run(router.client, 'echo', { sessionId: 's-idle' });
    expect(codeOf(later)).to.equal('NOT_FOUND');
    expect(router.router.state.workers.get('w1')?.status).to.equal('ready');
    // Silence: no report for WORKER_TTL.
    await eventually(
      () => router.router.state.workers.get('w1')?.status === 'evicted',
      'the silent worker to be evicted',
    );
    expect(router.router.state.workers.get('w1')?.evictedReason).to.equal('ttl');
    expect(await w.reportUtilization(), 'an evicted worker must register again').to.equal(false);
    await w.reportStatus();
    expect(router.router.state.workers.get('w1')?.status).to.equal('ready');
    await router.close();
    const forgotten = readLog(router.logDir).filter((event) => event.type === 'ContainerForgotten');
    expect(forgotten).to.have.length(1);
    expect(forgotten[0]).to.include({ workerId: 'w1', containerId, reason: 'unreported' });
  });
});
