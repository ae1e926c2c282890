import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { expect } from 'chai';
import { Metadata, status } from '@grpc/grpc-js';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { ContainerState, Flavor, WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { RegistrationError } from '../../src/worker/registry/index.js';
import { checkHealth } from '../support/health-client.js';
import { eventually } from '../support/router/harness.js';
import { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  recordFullReports,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';
import { freePort } from '../support/e2e-cluster.js';

const MiB = 1024 * 1024;
const CALL = jsonCall('def f():\n    return 1\n', 'f');

describe('registration and liveness', function () {
  this.timeout(60_000);
  const running: Harness[] = [];
  async function start(...args: Parameters<typeof startHarness>) {
    const harness = await startHarness(...args);
    running.push(harness);
    return harness;
  }
  afterEach(async () => {
    await Promise.all(running.splice(0).map((harness) => harness.stop()));
    cleanTempDirs();
  });

  it('registers READY with its address and capacity, then serves health', async () => {
    const harness = await start({
      flags: { memory: '6GiB', gpuMemory: '0', maxContainers: '5', flavor: 'cpu' },
    });
    const [report] = harness.router.statuses();
    expect(report).to.deep.include({
      workerId: harness.workerId,
      address: `127.0.0.1:${harness.worker.port}`,
      status: WorkerStatus.WORKER_STATUS_READY,
      error: '',
      flavor: Flavor.FLAVOR_CPU,
      memoryTotal: 6 * 1024 * MiB,
      maxContainers: 5,
      gpuMemoryTotal: 0,
      checkpoints: [],
      restoreBackend: 'template',
    });
    expect(report!.pythonVersion).to.match(/^3\.\d+\.\d+$/);
    expect(await checkHealth(`127.0.0.1:${harness.worker.port}`)).to.equal('SERVING');
    expect(
      await checkHealth(`127.0.0.1:${harness.worker.port}`, 'readie.v1.ExecutionService'),
    ).to.equal('SERVING');
  });

  it('retries registration while the router is unreachable, then registers', async () => {
    const port = await freePort();
    // The router comes up once the first attempt failed (not after a fixed time: a loaded
    // machine can take longer than that to start the worker up to its first attempt).
    let router: Promise<ScriptedRouter> | undefined;
    const retries: string[] = [];
    const log = pino(
      { level: 'warn' },
      {
        write: (line: string) => {
          const { msg } = JSON.parse(line) as { msg: string };
          retries.push(msg);
          if (msg === 'router unreachable; retrying') router ??= ScriptedRouter.start(port);
        },
      },
    );
    try {
      const harness = await start({
        router: { address: `127.0.0.1:${port}` } as ScriptedRouter,
        tuning: { registerRetryDelayMs: 150 },
        log,
      });
      expect(retries.filter((msg) => msg === 'router unreachable; retrying').length).to.be.within(
        1,
        3,
      );
      expect(router).not.to.equal(undefined);
      expect((await router!).statuses()[0]?.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
      expect(harness.worker.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
    } finally {
      await (await router)?.stop();
    }
  });

  it('gives up after three retries when the router stays unreachable', async () => {
    const port = await freePort();
    const started = performance.now();
    const failure = await startHarness({
      router: { address: `127.0.0.1:${port}` } as ScriptedRouter,
      tuning: { registerRetryDelayMs: 50 },
    }).then(
      () => null,
      (error: Error) => error,
    );
    expect(failure).to.be.instanceOf(RegistrationError);
    expect(failure!.message).to.include('unreachable after 4 attempts');
    expect(
      performance.now() - started,
      'waited 50 + 100 + 200 ms between attempts',
    ).to.be.greaterThan(340);
  });

  it('registers with an ERROR status saying why when there is no usable Python, and refuses calls', async () => {
    const harness = await start({ flags: { python: '/nonexistent/python3' } });
    const [report] = harness.router.statuses();
    expect(report!.status).to.equal(WorkerStatus.WORKER_STATUS_ERROR);
    expect(report!.error).to.equal('no Python at /nonexistent/python3');
    const result = await execute(harness.client, header({}), CALL);
    expect(result.code).to.equal(status.UNAVAILABLE);
    expect(result.details).to.include('no Python at /nonexistent/python3');
    expect(await checkHealth(`127.0.0.1:${harness.worker.port}`)).to.equal('NOT_SERVING');
  });

  it('registers with an ERROR status when the interpreter is not a usable Python', async () => {
    const harness = await start({ flags: { python: process.execPath } });
    const [report] = harness.router.statuses();
    expect(report!.status).to.equal(WorkerStatus.WORKER_STATUS_ERROR);
    expect(report!.error).to.include(`${process.execPath} does not run`);
  });

  it("registers with an ERROR status when its state directory (the containers' files) is unusable", async () => {
    const file = join(tempDir('rw-file-'), 'not-a-dir');
    writeFileSync(file, '');
    const harness = await start({ flags: { stateDir: file } });
    const [report] = harness.router.statuses();
    expect(report!.status).to.equal(WorkerStatus.WORKER_STATUS_ERROR);
    expect(report!.error).to.include(`the state directory ${file} is unusable`);
  });

  it('reports utilization every WORKER_UTILIZATION_INTERVAL and reports its status again when the router forgot it', async () => {
    const harness = await start({ env: { WORKER_UTILIZATION_INTERVAL: '100ms' } });
    const utilization = await harness.router.waitFor((report) => report.kind === 'utilization');
    expect(utilization.kind === 'utilization' && utilization.request).to.deep.include({
      workerId: harness.workerId,
      containerCount: 0,
      cpuTotal: cpus().length,
      gpuMemoryUsed: 0,
    });
    harness.router.registered = false;
    await harness.router.waitFor(() => harness.router.statuses().length >= 2);
    expect(harness.router.statuses()[1]!.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
  });

  it('reports to a router back at its address (restarted) from its next report on, not after the reconnect backoff', async () => {
    const harness = await start({ env: { WORKER_UTILIZATION_INTERVAL: '100ms' } });
    await harness.router.waitFor((report) => report.kind === 'utilization');
    const { port } = harness.router;
    await harness.router.stop();
    // The router stays away for 4 s (the scenario, not a wait for something): every report
    // fails, and the channel's reconnect backoff grows to seconds.
    await sleep(4_000);
    const taken = recordFullReports(harness.worker);
    const restarted = await ScriptedRouter.start(port);
    const back = performance.now();
    try {
      // Every report taken once it is back (200 ms allowed for a dial begun before it listened)
      // reaches it: none is lost to a backoff still running.
      const heard = () =>
        restarted.reports.flatMap((report) =>
          report.kind === 'utilization' ? [report.request.reportSeq] : [],
        );
      await eventually(
        () => taken.some((report) => report.at > back + 1_200),
        'a second of reports',
        10_000,
      );
      const due = taken.filter((report) => report.at > back + 200 && report.at <= back + 1_200);
      expect(due.length, 'reports taken in that second').to.be.greaterThan(3);
      // Reports go one at a time: one heard after them means each of them was sent or lost.
      const last = due.at(-1)!.reportSeq;
      await eventually(() => heard().some((seq) => seq >= last), 'reports to flow', 15_000);
      const lost = due.filter((report) => !heard().includes(report.reportSeq));
      expect(
        lost.map((report) => Math.round(report.at - back)),
        'ms after the restart of each report lost',
      ).to.deep.equal([]);
    } finally {
      await restarted.stop();
    }
  });

  it("reports the GPU memory its containers' calls hold, or the devices' reading when that is more", async () => {
    const dir = tempDir('rw-gpu-');
    const nvidiaSmi = join(dir, 'nvidia-smi');
    const reading = join(dir, 'reading');
    writeFileSync(reading, '');
    // The far side of the boundary: a driver tool that prints each device's MiB in use.
    writeFileSync(nvidiaSmi, `#!/bin/sh\ncat ${reading}\n`, { mode: 0o755 });
    const harness = await start({
      flags: { flavor: 'gpu', gpuMemory: '16GiB' },
      env: { WORKER_UTILIZATION_INTERVAL: '100ms' },
      tuning: { nvidiaSmi },
    });
    const gpuReported = (bytes: number) => () =>
      harness.router.reports.some(
        (report) => report.kind === 'utilization' && report.request.gpuMemoryUsed === bytes,
      );
    await harness.router.waitFor(gpuReported(0));
    const session = await execute(
      harness.client,
      header({ gpu: true, gpuMemory: 2 * 1024 * MiB, ids: { sessionId: 'on-gpu' } }),
      CALL,
    );
    expect(session.code, session.details).to.equal(status.OK);
    // The session's container keeps its call's budget while it lives.
    await harness.router.waitFor(gpuReported(2 * 1024 * MiB));
    writeFileSync(reading, '1024\n2048\n');
    await harness.router.waitFor(gpuReported(3 * 1024 * MiB));
  });

  it('reports every container state change: busy then ready for a session, busy then removed otherwise', async () => {
    const harness = await start();
    const session = await execute(harness.client, header({ ids: { sessionId: 's1' } }), CALL);
    const single = await execute(harness.client, header({}), CALL);
    const statesOf = (id: string) =>
      harness.router
        .containers()
        .filter((report) => report.containerId === id)
        .map((report) => report.state);
    await harness.router.waitFor(() => statesOf(single.ids!.containerId).length === 2);
    expect(statesOf(session.ids!.containerId)).to.deep.equal([
      ContainerState.CONTAINER_STATE_BUSY,
      ContainerState.CONTAINER_STATE_READY,
    ]);
    expect(statesOf(single.ids!.containerId)).to.deep.equal([
      ContainerState.CONTAINER_STATE_BUSY,
      ContainerState.CONTAINER_STATE_REMOVED,
    ]);
    const resumed = await execute(
      harness.client,
      header({ ids: { sessionId: 's1', containerId: session.ids!.containerId } }),
      CALL,
    );
    expect(envelopeOf(resumed).value).to.equal(1);
    await harness.router.waitFor(() => statesOf(session.ids!.containerId).length === 4);
    expect(statesOf(session.ids!.containerId).slice(2)).to.deep.equal([
      ContainerState.CONTAINER_STATE_BUSY,
      ContainerState.CONTAINER_STATE_READY,
    ]);
  });

  it('with --auth single-token: sends READIE_AUTH_TOKEN to the router and requires it on Execute', async () => {
    const harness = await start({
      flags: { auth: 'single-token' },
      env: { READIE_AUTH_TOKEN: 's3cret-token' },
    });
    expect(harness.router.reports[0]!.authorization).to.equal('Bearer s3cret-token');
    const missing = await execute(harness.client, header({}), CALL);
    expect(missing.code).to.equal(status.UNAUTHENTICATED);
    expect(missing.details).to.include('from the router alone');
    expect(missing.details).not.to.include('s3cret');
    const wrong = new Metadata();
    wrong.set('authorization', 'Bearer nope');
    expect((await execute(harness.client, header({}), CALL, { metadata: wrong })).code).to.equal(
      status.UNAUTHENTICATED,
    );
    const right = new Metadata();
    right.set('authorization', 'Bearer s3cret-token');
    const ok = await execute(harness.client, header({}), CALL, { metadata: right });
    expect(envelopeOf(ok).value).to.equal(1);
    await harness.router.waitFor((report) => report.kind === 'container');
    expect(
      harness.router.reports.every((report) => report.authorization === 'Bearer s3cret-token'),
    ).to.equal(true);
  });
});
