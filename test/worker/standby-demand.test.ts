import { expect } from 'chai';
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

describe('standbys sized to demand, and the load report that lists them', function () {
  this.timeout(60_000);
  let harness: Harness;
  /** The worker's clock runs this far ahead of the machine's. */
  let ahead = 0;
  before(async () => {
    harness = await startHarness({
      catalogue: CATALOGUE,
      flags: { maxContainers: '12', standby: '1', standbyMax: '4' },
      env: { WORKER_UTILIZATION_INTERVAL: '300ms' },
      tuning: { clock: () => Date.now() + ahead },
    });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('keeps as many standbys as a burst of new containers asked for, up to --standby-max, then the floor again', async () => {
    const pool = harness.worker.pool!;
    await pool.settled();
    expect(pool.standbysOf('checkpoint_0'), 'the floor (--standby 1)').to.equal(1);
    // Six sessions open at once, as a map's slots do: six new containers of checkpoint_0. A call
    // that finds a standby of its checkpoint being restored waits for it rather than restoring
    // one of its own beside it: never more containers than slots, even mid-burst.
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, pool.count + pool.standbyCount);
    }, 2);
    const calls = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        execute(
          harness.client,
          header({ ids: { sessionId: `s${i}`, checkpointId: 'checkpoint_0' } }),
          CALL,
        ),
      ),
    );
    for (const call of calls) expect(envelopeOf(call).value).to.equal('ran');
    clearInterval(sampler);
    expect(most, 'containers held, starting and standing by').to.be.at.most(12);
    expect(pool.standbyTarget('checkpoint_0'), 'capped by --standby-max').to.equal(4);
    expect(pool.standbyTarget('ckpt-numpy'), 'no demand for it').to.equal(1);
    // A restore that fails under load is restocked by the next trim (every 5 s).
    await eventually(() => pool.standbysOf('checkpoint_0') === 4, 'four standbys', 30_000);
    expect(pool.count + pool.standbyCount, 'within the slots').to.be.at.most(12);
    await pool.settled();
    // The load report tells the router how many are ready, per checkpoint.
    const report = await harness.router.waitFor(
      (r) =>
        r.kind === 'utilization' &&
        r.request.standbys.some((s) => s.checkpointId === 'checkpoint_0' && s.ready === 4),
    );
    expect(report.kind === 'utilization' && report.request.standbys).to.deep.include({
      checkpointId: 'ckpt-numpy',
      ready: 1,
    });
    // EXECUTOR_TTL (10 min) later the burst is forgotten: the standbys above the floor go.
    ahead = 601_000;
    pool.trimStandbys();
    expect(pool.standbysOf('checkpoint_0')).to.equal(1);
    await pool.settled();
    expect(pool.standbysOf('checkpoint_0')).to.equal(1);
  });
});
