import { expect } from 'chai';
import type { ServiceError } from '@grpc/grpc-js';
import { ContainerState, Flavor, WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
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

const GiB = 1024 ** 3;

describe('router: RegistryService', function () {
  this.timeout(60_000);
  let test: TestRouter;
  const workers: ScriptedWorker[] = [];

  async function worker(workerId: string): Promise<ScriptedWorker> {
    const started = await ScriptedWorker.start({ workerId });
    workers.push(started);
    return started.connect(test.address);
  }

  beforeEach(async () => (test = await startTestRouter()));
  afterEach(async () => {
    for (const started of workers.splice(0)) started.stop();
    await test.close();
    expect(foldLog(test.logDir).reservations.size, 'no reservation in the log').to.equal(0);
    cleanTempDirs();
  });

  it('a ready status registers the worker with its capacities', async () => {
    const w = await worker('w-gpu');
    await w.reportStatus({
      flavor: Flavor.FLAVOR_GPU,
      memoryTotal: 32 * GiB,
      maxContainers: 4,
      gpuMemoryTotal: 24 * GiB,
    });
    await test.close();
    const registered = readLog(test.logDir).find((event) => event.type === 'WorkerRegistered');
    expect(registered).to.deep.include({
      workerId: 'w-gpu',
      address: w.address,
      status: 'ready',
      error: null,
      flavor: 'gpu',
      memoryTotal: 32 * GiB,
      maxContainers: 4,
      gpuMemoryTotal: 24 * GiB,
    });
    test = await startTestRouter({ logDir: test.logDir });
    expect(test.router.state.workers.get('w-gpu')?.status).to.equal('ready');
  });

  it('an error status registers the worker as never placeable', async () => {
    const w = await worker('w-broken');
    await w.reportStatus({ status: WorkerStatus.WORKER_STATUS_ERROR, error: 'no python' });
    const worker1 = test.router.state.workers.get('w-broken');
    expect(worker1).to.include({ status: 'error', error: 'no python' });
    expect(codeOf(await run(test.client, 'echo'))).to.equal('UNAVAILABLE');
  });

  it('a removed status means leaving: no new work, running calls finish', async () => {
    const w = await worker('w-leaving');
    await w.reportStatus();
    const running = run(test.client, 'sleep 300', { requestId: 'r-running' });
    await eventually(() => w.calls.length === 1, 'the call to run');
    await w.reportStatus({ status: WorkerStatus.WORKER_STATUS_REMOVED });
    expect(test.router.state.workers.get('w-leaving')?.status).to.equal('leaving');
    expect(codeOf(await run(test.client, 'echo'))).to.equal('UNAVAILABLE');
    expect(codeOf(await running)).to.equal('OK');
    expect(test.router.state.reservations.size).to.equal(0);
  });

  it('asks an unknown worker to register instead of recording its reports', async () => {
    const w = await worker('w-stranger');
    expect(await w.reportUtilization()).to.equal(false);
    expect(await w.reportContainer('c1', ContainerState.CONTAINER_STATE_READY)).to.equal(false);
    expect(test.router.state.workers.size).to.equal(0);
    await w.reportStatus();
    expect(await w.reportUtilization({ memoryUsed: 5 })).to.equal(true);
    expect(test.router.state.workers.get('w-stranger')?.utilization?.memoryUsed).to.equal(5);
  });

  it("records a load report's ready standbys per checkpoint, and refuses a list out of bounds", async () => {
    const w = await worker('w-standbys');
    await w.reportStatus();
    const standbys = [
      { checkpointId: 'checkpoint_0', ready: 3 },
      { checkpointId: 'ckpt-numpy', ready: 1 },
    ];
    expect(await w.reportUtilization({ standbys })).to.equal(true);
    expect(test.router.state.workers.get('w-standbys')?.utilization?.standbys).to.deep.equal(
      standbys,
    );
    // Logged too (the log commits in the background: wait for it on disk).
    await eventually(
      () =>
        readLog(test.logDir).some(
          (event) =>
            event.type === 'WorkerUtilization' &&
            JSON.stringify(event.standbys) === JSON.stringify(standbys),
        ),
      'the report with its standbys in the log',
    );
    const refused = (fields: Parameters<typeof w.reportUtilization>[0]) =>
      w.reportUtilization(fields).then(
        () => undefined,
        (e: ServiceError) => e,
      );
    const twice = await refused({ standbys: [standbys[0]!, standbys[0]!] });
    expect(twice?.code).to.equal(3);
    expect(twice?.details).to.contain('standbys lists checkpoint checkpoint_0 twice');
    const many = Array.from({ length: 257 }, (_, i) => ({ checkpointId: `c${i}`, ready: 1 }));
    expect((await refused({ standbys: many }))?.details).to.contain(
      'a load report lists standbys of at most 256 checkpoints, not 257',
    );
  });

  it('records container states; a removed container expires the session pinned there', async () => {
    const w = await worker('w1');
    await w.reportStatus();
    const first = await run(test.client, 'echo', { sessionId: 's1' });
    const containerId = first.ids.at(-1)?.containerId as string;
    expect(await w.reportContainer(containerId, ContainerState.CONTAINER_STATE_READY)).to.equal(
      true,
    );
    expect(test.router.state.workers.get('w1')?.containers.get(containerId)?.state).to.equal(
      'ready',
    );
    await w.reportContainer(containerId, ContainerState.CONTAINER_STATE_REMOVED);
    expect(test.router.state.sessions.get('s1')?.expired?.reason).to.equal('container_removed');
    await test.close();
    const events = readLog(test.logDir);
    const removed = events.findIndex(
      (event) => event.type === 'ContainerStateChanged' && event.state === 'removed',
    );
    expect(events[removed + 1], 'the consequence follows its cause').to.include({
      type: 'SessionExpired',
      sessionId: 's1',
      reason: 'container_removed',
    });
    test = await startTestRouter({ logDir: test.logDir });
  });

  it('logs a removal once: a full report taken during the teardown drops it, the later removal report changes nothing', async () => {
    const w = await worker('w1');
    await w.reportStatus();
    expect(await w.reportContainer('c1', ContainerState.CONTAINER_STATE_BUSY, '', 1)).to.equal(
      true,
    );
    // Taken while the worker tore c1 down: it no longer lists it.
    await w.reportUtilization({ reportSeq: 2, containerCount: 0, containers: [] });
    expect(test.router.state.workers.get('w1')?.containers.has('c1')).to.equal(false);
    expect(await w.reportContainer('c1', ContainerState.CONTAINER_STATE_REMOVED, '', 3)).to.equal(
      true,
    );
    // Closed, so the log on disk holds every append (a reader may not see the newest commit yet).
    await test.close();
    const removals = readLog(test.logDir).filter(
      (event) => event.type === 'ContainerStateChanged' && event.containerId === 'c1',
    );
    expect(
      removals.map((event) => [event.type === 'ContainerStateChanged' && event.state, event.cause]),
    ).to.deep.equal([
      ['busy', 'report:w1'],
      ['removed', 'report:w1'],
    ]);
    test = await startTestRouter({ logDir: test.logDir });
  });

  it('refuses a malformed report with INVALID_ARGUMENT naming the field', async () => {
    const w = await worker('');
    const error = await w.reportStatus().then(
      () => undefined,
      (e: ServiceError) => e,
    );
    expect(error?.code).to.equal(3);
    expect(error?.details).to.match(/worker_id is required/);
    const noAddress = await worker('w-noaddr');
    const missing = await noAddress.reportStatus({ address: '' }).then(
      () => undefined,
      (e: ServiceError) => e,
    );
    expect(missing?.details).to.match(/address/);
  });

  it("reconciles a worker's images with its report of every image it holds, and refuses a hostile one before logging", async () => {
    const w = await worker('w-img');
    await w.reportStatus();
    const image = (imageId: string, tenantId = 'acme') => ({
      tenantId,
      imageId,
      bytes: 27_000,
      declarations: ['cd'.repeat(32)],
    });
    const imageEvents = () =>
      readLog(test.logDir).filter(
        (event) => event.type === 'ImageBuilt' || event.type === 'ImageRemoved',
      );
    expect(await w.reportHeldImages([image('ab'.repeat(32)), image('12'.repeat(32))])).to.equal(
      true,
    );
    await eventually(() => imageEvents().length === 2, 'both images found');
    // The same list again: nothing new. Then one is gone.
    expect(await w.reportHeldImages([image('ab'.repeat(32)), image('12'.repeat(32))])).to.equal(
      true,
    );
    expect(await w.reportHeldImages([image('ab'.repeat(32))])).to.equal(true);
    await eventually(() => imageEvents().length === 3, 'the absent image removed');
    expect(imageEvents().map((event) => [event.type, event.cause])).to.deep.equal([
      ['ImageBuilt', 'report:w-img'],
      ['ImageBuilt', 'report:w-img'],
      ['ImageRemoved', 'report:w-img'],
    ]);
    const removed = imageEvents()[2];
    expect(removed?.type === 'ImageRemoved' && [removed.imageId, removed.reason]).to.deep.equal([
      '12'.repeat(32),
      'absent',
    ]);
    // A tenant ID with a control character, an identity that is not one: refused, nothing logged.
    for (const hostile of [image('ab'.repeat(32), 'acme\nother'), image('../../etc')]) {
      const error = await w.reportHeldImages([hostile]).then(
        () => undefined,
        (e: ServiceError) => e,
      );
      expect(error?.code).to.equal(3);
      expect(error?.details).to.match(/images\[0\]\.(tenant_id|image_id)/);
    }
    expect(imageEvents()).to.have.length(3);
    // An unknown worker is asked to register.
    const stranger = await worker('w-unknown');
    expect(await stranger.reportHeldImages([image('ab'.repeat(32))])).to.equal(false);
  });
});
