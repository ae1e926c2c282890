/**
 * A worker touches only what it created: workers with one ID (two clusters on a host), or
 * sharing a parent cgroup, never kill or remove each other's containers, and a second worker
 * on a state directory in use refuses to start.
 */
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { WorkerStartupError } from '../../src/worker/index.js';
import { cleanTempDirs } from '../support/temp.js';
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

const BUMP = py`
  def bump():
      global count
      count = globals().get("count", 0) + 1
      return count
`;

async function bump(harness: Harness, sessionId: string, containerId = '') {
  const result = await execute(
    harness.client,
    header({ ids: { sessionId, containerId } }),
    jsonCall(BUMP, 'bump'),
  );
  return { value: envelopeOf(result).value as number, containerId: result.ids!.containerId };
}

describe('what a worker owns', function () {
  this.timeout(120_000);
  const running: Harness[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((harness) => harness.stop()));
    cleanTempDirs();
  });

  async function start(flags: Record<string, string> = {}) {
    const harness = await startHarness({ flags });
    running.push(harness);
    return harness;
  }

  it("two workers with one ID get their own cgroups; neither's start or stop touches the other's containers", async () => {
    const id = testWorkerId();
    const first = await start({ id });
    const kept = await bump(first, 'sess-first');
    const second = await start({ id });
    expect(second.worker.options.cgroupParent).not.to.equal(first.worker.options.cgroupParent);
    expect((await bump(second, 'sess-second')).value).to.equal(1);
    expect((await bump(first, 'sess-first', kept.containerId)).value).to.equal(2);
    await second.stop();
    running.splice(running.indexOf(second), 1);
    expect((await bump(first, 'sess-first', kept.containerId)).value).to.equal(3);
  });

  it('two workers sharing a parent cgroup leave each other’s containers and the parent alone', async () => {
    const parent = `readie/shared-${testWorkerId()}`;
    const first = await start({ cgroupParent: parent });
    const kept = await bump(first, 'sess-shared');
    const cgroupDir = first.worker.pool!.list()[0]!.cgroup.path;
    const second = await start({ cgroupParent: parent });
    await second.stop();
    running.splice(running.indexOf(second), 1);
    expect(existsSync(cgroupDir), "the first worker's container cgroup").to.equal(true);
    expect((await bump(first, 'sess-shared', kept.containerId)).value).to.equal(2);
  });

  it('refuses to start on a state directory a live worker uses', async () => {
    const first = await start();
    let refusal: unknown = null;
    try {
      running.push(await startHarness({ flags: { stateDir: first.worker.options.stateDir } }));
    } catch (error) {
      refusal = error;
    }
    expect(refusal).to.be.instanceOf(WorkerStartupError);
    expect((refusal as Error).message).to.include(`in use by worker process ${process.pid}`);
    // Its containers were not cleared away as leftovers.
    const kept = await bump(first, 'sess-state');
    expect(
      existsSync(join(first.worker.options.stateDir, 'containers', kept.containerId)),
    ).to.equal(true);
  });
});
