import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { CATALOGUE } from '../support/catalogues.js';
import { eventually } from '../support/router/harness.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const CALL = jsonCall('def f():\n    return "ran"\n', 'f');

describe('container slots (WORKER_MAX_EXECUTORS) and the reports that list them', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness({
      catalogue: CATALOGUE,
      flags: { maxContainers: '2', standby: '1' },
      env: { WORKER_UTILIZATION_INTERVAL: '300ms' },
    });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('standbys fill only free slots and give theirs up when a call needs it', async () => {
    const pool = harness.worker.pool!;
    // Two checkpoints, one standby each: both slots are filled ahead of demand (the restores
    // start once the worker holds its checkpoints, which may be after the harness is up; a
    // restore that fails under load is restocked by the next trim, every 5 s).
    const ready = () => pool.standbyCounts().reduce((sum, shelf) => sum + shelf.ready, 0);
    await eventually(() => ready() === 2, 'a ready standby of each checkpoint', 45_000);
    await pool.settled();
    expect(pool.standbyCount).to.equal(2);
    expect(pool.count, 'standbys hold no call slot').to.equal(0);
    const first = await execute(harness.client, header({ ids: { sessionId: 's1' } }), CALL);
    expect(envelopeOf(first).value).to.equal('ran');
    await pool.settled();
    expect(pool.count).to.equal(1);
    expect(pool.count + pool.standbyCount, 'never more containers than slots').to.be.at.most(2);
    const second = await execute(harness.client, header({ ids: { sessionId: 's2' } }), CALL);
    expect(envelopeOf(second).value).to.equal('ran');
    await pool.settled();
    expect(pool.count).to.equal(2);
    expect(pool.standbyCount, 'no free slot: no standby').to.equal(0);
    const third = await execute(harness.client, header({}), CALL);
    expect(third.code).to.equal(status.RESOURCE_EXHAUSTED);
    expect(third.details).to.contain('already holds 2 containers');
  });

  it('the load report lists every container held for calls and sessions, each report numbered once', async () => {
    const pool = harness.worker.pool!;
    const held = pool
      .held()
      .map((container) => container.containerId)
      .sort();
    expect(held).to.have.length(2);
    const report = await harness.router.waitFor(
      (r) =>
        r.kind === 'utilization' && r.request.reportSeq > 0 && r.request.containers.length === 2,
    );
    expect(report.kind === 'utilization' && report.request.instanceId).to.equal(
      harness.worker.instanceId,
    );
    const listed =
      report.kind === 'utilization'
        ? report.request.containers.map((entry) => entry.containerId).sort()
        : [];
    expect(listed).to.deep.equal(held);
    for (const entry of report.kind === 'utilization' ? report.request.containers : []) {
      expect(entry.state).to.equal(ContainerState.CONTAINER_STATE_READY);
    }
    // Numbered in the order they were taken, container reports and load reports together
    // (residency and image reports, about versions and images rather than containers, are not numbered).
    const numbers = harness.router.reports
      .flatMap((r) =>
        r.kind === 'residency' || r.kind === 'image' || r.kind === 'held-images' ? [] : [r],
      )
      .filter((r) => r.kind !== 'status' || r.request.reportSeq > 0)
      .map((r) => r.request.reportSeq)
      .filter((n) => n > 0);
    expect(new Set(numbers).size, 'every number once').to.equal(numbers.length);
  });
});
