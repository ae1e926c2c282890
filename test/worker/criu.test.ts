import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { probeCriu } from '../../src/worker/backend-selection.js';
import { ContainerCgroups } from '../../src/worker/sandbox/index.js';
import { CATALOGUE } from '../support/catalogues.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  testLogger,
  testSandbox,
  testWorkerId,
  type Harness,
} from '../support/worker-harness.js';
import { PYTHON } from '../support/python.js';

const DRAW = py`
  import random, sys
  def draw():
      import numpy
      return {"random": random.random(), "numpy": float(numpy.random.random()), "pid": __import__("os").getpid()}
`;

describe('the CRIU restore backend', function () {
  this.timeout(120_000);
  let probe: Awaited<ReturnType<typeof probeCriu>>;

  before(async () => {
    const workerId = testWorkerId();
    const cgroups = await ContainerCgroups.open(`readie/${workerId}`);
    try {
      probe = await probeCriu({
        python: PYTHON,
        log: testLogger(),
        cgroups,
        stateDir: tempDir('rw-criu-'),
        sandbox: await testSandbox(),
        workerId,
        buildTimeoutMs: 60_000,
        rebuildDelayMs: 60_000,
        probeTimeoutMs: 20_000,
      });
    } finally {
      await cgroups.close();
    }
    if (!probe.ok) console.log(`      (CRIU probe failed on this machine: ${probe.reason})`);
  });
  after(cleanTempDirs);

  it('probes with a real check, dump and restore, and either passes or says why not', () => {
    if (probe.ok) expect(probe.version).to.match(/^\d/);
    else
      expect(probe.reason).to.match(
        /^criu (is not installed|\S+ (check|dump\+restore) failed: .+)/,
      );
  });

  it('a worker asked for auto reports the backend it really uses, with the reason for a fallback', async () => {
    const harness = await startHarness({ flags: { restoreBackend: 'auto' }, catalogue: CATALOGUE });
    try {
      const reported = harness.router.statuses()[0]!.restoreBackend;
      if (probe.ok) expect(reported).to.equal(`criu ${probe.version}`);
      else expect(reported).to.equal(`template (criu unusable: ${probe.reason})`);
      expect(harness.router.statuses()[0]!.checkpoints).to.include('ckpt-numpy');
    } finally {
      await harness.stop();
    }
  });

  it('a worker asked for criu where the probe fails registers with an ERROR status saying why', async function () {
    if (probe.ok) {
      console.log('      skipped: the CRIU probe passes on this machine');
      this.skip();
    }
    const harness = await startHarness({ flags: { restoreBackend: 'criu' }, catalogue: CATALOGUE });
    try {
      const [report] = harness.router.statuses();
      expect(report!.status).to.equal(WorkerStatus.WORKER_STATUS_ERROR);
      expect(report!.error).to.include(
        `--restore-backend criu, but criu is unusable here: ${probe.reason}`,
      );
      const result = await execute(harness.client, header({}), jsonCall(DRAW, 'draw'));
      expect(result.code).to.equal(status.UNAVAILABLE);
    } finally {
      await harness.stop();
    }
  });

  describe('where the probe passes', () => {
    let harness: Harness | null = null;
    before(async function () {
      if (!probe.ok) return;
      harness = await startHarness({ flags: { restoreBackend: 'criu' }, catalogue: CATALOGUE });
    });
    after(async () => {
      await harness?.stop();
    });

    it('restores containers from a dumped checkpoint and reports it in every answer', async function () {
      if (!probe.ok || !harness) {
        console.log(`      skipped: ${probe.ok ? 'no worker' : probe.reason}`);
        this.skip();
      }
      expect(harness.router.statuses()[0]!.restoreBackend).to.match(/^criu /);
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-numpy' } }),
        jsonCall(DRAW, 'draw'),
      );
      expect(envelopeOf(result).ok).to.equal(true);
      for (const { response } of result.responses)
        expect(response.ids?.checkpointId).to.equal('ckpt-numpy');
    });

    it('reseeds random and numpy in each restored container', async function () {
      if (!probe.ok || !harness) {
        console.log(`      skipped: ${probe.ok ? 'no worker' : probe.reason}`);
        this.skip();
      }
      const draws = await Promise.all(
        [1, 2].map(
          async () =>
            envelopeOf(
              await execute(
                harness!.client,
                header({ ids: { checkpointId: 'ckpt-numpy' } }),
                jsonCall(DRAW, 'draw'),
              ),
            ).value as { random: number; numpy: number },
        ),
      );
      expect(draws[0]!.random).not.to.equal(draws[1]!.random);
      expect(draws[0]!.numpy).not.to.equal(draws[1]!.numpy);
    });
  });
});
