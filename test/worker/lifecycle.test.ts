import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { credentials, status } from '@grpc/grpc-js';
import { ExecutionServiceClient } from '../../src/proto/gen/readie/v1/execution.js';
import { ContainerState, WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { stateDirTag } from '../../src/worker/options.js';
import { defaultCgroupParent, findMemoryHierarchy } from '../../src/worker/sandbox/index.js';
import { ScriptedRouter, type Report } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  testWorkerId,
  type Harness,
} from '../support/worker-harness.js';
import { PYTHON } from '../support/python.js';

const CALL = jsonCall('def f():\n    return 1\n', 'f');
const SLEEP = py`
  import time
  def nap(seconds):
      print("napping", flush=True)
      time.sleep(seconds)
      return "rested"
`;

/**
 * How long a `readie worker` process may take to start and register: seconds alone, well past
 * 10 s when the machine runs two suites at once.
 */
const STARTUP_MS = 60_000;

describe('container lifecycle', function () {
  this.timeout(180_000);
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

  it('refuses a new container at WORKER_MAX_EXECUTORS with RESOURCE_EXHAUSTED', async () => {
    const harness = await start({ flags: { maxContainers: '1' } });
    const held = await execute(harness.client, header({ ids: { sessionId: 'keep' } }), CALL);
    expect(envelopeOf(held).value).to.equal(1);
    const refused = await execute(harness.client, header({}), CALL);
    expect(refused.code).to.equal(status.RESOURCE_EXHAUSTED);
    expect(refused.details).to.include('WORKER_MAX_EXECUTORS=1');
    const resumed = await execute(
      harness.client,
      header({ ids: { sessionId: 'keep', containerId: held.ids!.containerId } }),
      CALL,
    );
    expect(envelopeOf(resumed).value).to.equal(1);
  });

  it("re-applies the memory limit of each call when it resumes a session's container", async () => {
    const harness = await start();
    const source = 'def limit():\n    return open("/proc/self/cgroup").read()\n';
    const first = await execute(
      harness.client,
      header({ memory: 300 * 1024 * 1024, ids: { sessionId: 'mem' } }),
      jsonCall(source, 'limit'),
    );
    expect(envelopeOf(first).ok).to.equal(true);
    const container = harness.worker.pool!.list().find((c) => c.id === first.ids!.containerId)!;
    expect(container.memoryLimit).to.equal(300 * 1024 * 1024);
    const second = await execute(
      harness.client,
      header({ memory: 400 * 1024 * 1024, ids: { sessionId: 'mem', containerId: container.id } }),
      jsonCall(source, 'limit'),
    );
    expect(envelopeOf(second).ok).to.equal(true);
    expect(container.memoryLimit).to.equal(400 * 1024 * 1024);
    const { readFileSync } = await import('node:fs');
    const file = container.cgroup.version === 2 ? 'memory.max' : 'memory.limit_in_bytes';
    expect(Number(readFileSync(`${container.cgroup.path}/${file}`, 'utf8'))).to.equal(
      400 * 1024 * 1024,
    );
  });

  it('stops the work and removes the container when the router cancels the call', async () => {
    const harness = await start();
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 'cancelled' } }),
      jsonCall(SLEEP, 'nap', [30]),
      // Once it prints "napping" (not after a fixed time: on a loaded machine the container may
      // not have answered yet, and the call's IDs would be unknown).
      { cancelOnFirstAnswer: true },
    );
    expect(result.code).to.equal(status.CANCELLED);
    const containerId = result.ids!.containerId;
    await harness.router.waitFor(
      (report) =>
        report.kind === 'container' &&
        report.request.containerId === containerId &&
        report.request.state === ContainerState.CONTAINER_STATE_REMOVED,
    );
    expect(harness.worker.pool!.count).to.equal(0);
  });

  it('ends a call that outlives EXECUTION_TIMEOUT with DEADLINE_EXCEEDED and destroys its container', async () => {
    const harness = await start({ env: { EXECUTION_TIMEOUT: '800ms' } });
    // EXECUTION_TIMEOUT counts from the call's start, a new container's start included (on a
    // loaded machine that alone can take longer): the session's container is started by a first
    // call, and the slow call resumes it, so the limit is met by the function's own run.
    const first = await execute(harness.client, header({ ids: { sessionId: 'slow' } }), CALL);
    expect(first.code, first.details).to.equal(status.OK);
    const containerId = first.ids!.containerId;
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 'slow', containerId } }),
      jsonCall(SLEEP, 'nap', [30]),
    );
    expect(result.code).to.equal(status.DEADLINE_EXCEEDED);
    expect(result.details).to.include('EXECUTION_TIMEOUT');
    expect(result.endedAt - result.startedAt).to.be.lessThan(5_000);
    expect(result.ids?.containerId).to.equal(containerId);
    await harness.router.waitFor(
      (report) =>
        report.kind === 'container' &&
        report.request.containerId === containerId &&
        report.request.state === ContainerState.CONTAINER_STATE_REMOVED,
    );
  });

  it('destroys a session container idle for EXECUTOR_TTL and reports it removed before the router would forget it', async () => {
    // The worker owns EXECUTOR_TTL; the router forgets a record the worker never reported removed
    // only after EXECUTOR_TTL plus one WORKER_UTILIZATION_INTERVAL.
    const harness = await start({ env: { EXECUTOR_TTL: '1s', WORKER_UTILIZATION_INTERVAL: '2s' } });
    const result = await execute(harness.client, header({ ids: { sessionId: 'idle' } }), CALL);
    const reported = (state: ContainerState) => (report: Report) =>
      report.kind === 'container' &&
      report.request.containerId === result.ids!.containerId &&
      report.request.state === state;
    await harness.router.waitFor(reported(ContainerState.CONTAINER_STATE_READY));
    const idleSince = performance.now();
    await harness.router.waitFor(reported(ContainerState.CONTAINER_STATE_REMOVED));
    const idleFor = performance.now() - idleSince;
    expect(idleFor, 'not before EXECUTOR_TTL').to.be.at.least(900);
    expect(idleFor, 'within the router grace').to.be.below(1_000 + 2_000);
    expect(harness.worker.pool!.count).to.equal(0);
  });

  it("destroys an ended session's container at once, only for its own session, and after a running call", async () => {
    const harness = await start();
    const destroy = (sessionId: string, containerId: string) =>
      new Promise<{ removed: boolean }>((resolve, reject) =>
        harness.client.destroySessionContainer({ sessionId, containerId }, (error, answer) =>
          error ? reject(error) : resolve(answer),
        ),
      );
    const removedReport = (containerId: string) => (report: Report) =>
      report.kind === 'container' &&
      report.request.containerId === containerId &&
      report.request.state === ContainerState.CONTAINER_STATE_REMOVED;

    const first = await execute(harness.client, header({ ids: { sessionId: 'ended' } }), CALL);
    const containerId = first.ids!.containerId;
    // Another session's end does not touch it.
    const refused = await destroy('other', containerId).catch(
      (error: { code: number }) => error.code,
    );
    expect(refused).to.equal(status.PERMISSION_DENIED);
    expect(await destroy('ended', containerId)).to.deep.equal({ removed: true });
    await harness.router.waitFor(removedReport(containerId));
    expect(harness.worker.pool!.count).to.equal(0);
    expect(await destroy('ended', containerId)).to.deep.equal({ removed: false });

    // Ended while a call runs in it: destroyed when the call ends, not kept for the session.
    const warm = await execute(harness.client, header({ ids: { sessionId: 'busy' } }), CALL);
    const busyId = warm.ids!.containerId;
    const napping = execute(
      harness.client,
      header({ ids: { sessionId: 'busy', containerId: busyId } }),
      jsonCall(SLEEP, 'nap', [0.5]),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await destroy('busy', busyId)).to.deep.equal({ removed: true });
    expect(envelopeOf(await napping).value).to.equal('rested');
    await harness.router.waitFor(removedReport(busyId));
  });

  it('on SIGTERM reports REMOVED, finishes the running call, refuses new ones, then exits 0', async () => {
    const router = await ScriptedRouter.start();
    const stateDir = tempDir('rw-');
    const bin = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
    const child = spawn(
      process.execPath,
      [
        bin,
        'worker',
        '--router',
        router.address,
        '--listen',
        '127.0.0.1:0',
        '--id',
        testWorkerId(),
        '--flavor',
        'cpu',
        '--state-dir',
        `${stateDir}/state`,
        '--python',
        PYTHON,
        '--insecure',
        '--auth',
        'none',
        '--restore-backend',
        'template',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } },
    );
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    try {
      await router.waitFor((report) => report.kind === 'status', STARTUP_MS);
      const address = router.statuses()[0]!.address;
      const client = new ExecutionServiceClient(address, credentials.createInsecure());
      const longCall = execute(client, header({}), jsonCall(SLEEP, 'nap', [1.5]));
      await router.waitFor(
        (report) =>
          report.kind === 'container' &&
          report.request.state === ContainerState.CONTAINER_STATE_BUSY,
      );
      child.kill('SIGTERM');
      await router.waitFor(
        (report) =>
          report.kind === 'status' && report.request.status === WorkerStatus.WORKER_STATUS_REMOVED,
      );
      const refused = await execute(client, header({}), CALL);
      expect(refused.code).to.equal(status.UNAVAILABLE);
      const finished = await longCall;
      expect(envelopeOf(finished).value).to.equal('rested');
      expect(await exited).to.equal(0);
      client.close();
      const removedAt = router.reports.findIndex(
        (report) =>
          report.kind === 'status' && report.request.status === WorkerStatus.WORKER_STATUS_REMOVED,
      );
      const containerRemovedAt = router.reports.findIndex(
        (report) =>
          report.kind === 'container' &&
          report.request.state === ContainerState.CONTAINER_STATE_REMOVED,
      );
      expect(removedAt).to.be.lessThan(containerRemovedAt);
      const log = lines.map((line) => JSON.parse(line) as { msg: string; workerId?: string });
      expect(log.map((entry) => entry.msg)).to.include.members(['leaving', 'worker stopped']);
      expect(log.every((entry) => entry.workerId !== undefined)).to.equal(true);
    } finally {
      child.kill('SIGKILL');
      await router.stop();
    }
  });

  it('takes its containers with it when killed outright, and a restart removes what was left', async () => {
    const router = await ScriptedRouter.start();
    const workerId = testWorkerId();
    const stateDir = `${tempDir('rw-')}/state`;
    const bin = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
    const args = [
      bin,
      'worker',
      '--router',
      router.address,
      '--listen',
      '127.0.0.1:0',
      '--id',
      workerId,
      '--flavor',
      'cpu',
      '--state-dir',
      stateDir,
      '--python',
      PYTHON,
      '--insecure',
      '--auth',
      'none',
      '--restore-backend',
      'template',
    ];
    const start = () => {
      const child = spawn(process.execPath, args, { stdio: 'ignore' });
      return { child, exited: new Promise((resolve) => child.on('exit', resolve)) };
    };
    const hierarchy = findMemoryHierarchy(readFileSync('/proc/self/mountinfo', 'utf8'))!;
    const first = start();
    try {
      await router.waitFor((report) => report.kind === 'status', STARTUP_MS);
      const client = new ExecutionServiceClient(
        router.statuses()[0]!.address,
        credentials.createInsecure(),
      );
      const kept = await execute(client, header({ ids: { sessionId: 'orphan' } }), CALL);
      client.close();
      const parent = defaultCgroupParent(workerId, stateDirTag(stateDir));
      const cgroup = join(hierarchy.mountPoint, parent, kept.ids!.containerId);
      const procs = () => readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').trim();
      expect(procs()).not.to.equal('');
      first.child.kill('SIGKILL');
      await first.exited;
      const deadline = Date.now() + 20_000;
      while (procs() !== '' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(procs(), 'the container died with its worker').to.equal('');
      const second = start();
      try {
        await router.waitFor(() => router.statuses().length >= 2, STARTUP_MS);
        expect(
          existsSync(cgroup),
          "the restarted worker removed the dead container's cgroup",
        ).to.equal(false);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      first.child.kill('SIGKILL');
      await router.stop();
    }
  });
});
