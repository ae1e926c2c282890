import { expect } from 'chai';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { CATALOGUE } from '../support/catalogues.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const DRAW = py`
  import random, sys
  def draw():
      imported_before = "numpy" in sys.modules
      import numpy
      return {"numpy_was_imported": imported_before, "random": random.random(),
              "numpy": float(numpy.random.random())}
`;

describe('checkpoints (template backend)', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness({ catalogue: CATALOGUE });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('builds the checkpoints of its flavor and reports the ones it holds, with the backend', () => {
    const status = harness.router.statuses()[0]!;
    expect(status.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
    expect(status.checkpoints).to.deep.equal(['checkpoint_0', 'ckpt-numpy']);
    expect(status.restoreBackend).to.equal('template');
  });

  it('restores a container from the named checkpoint and says so in every answer', async () => {
    const result = await execute(
      harness.client,
      header({ ids: { checkpointId: 'ckpt-numpy' } }),
      jsonCall(DRAW, 'draw'),
    );
    const value = envelopeOf(result).value as { numpy_was_imported: boolean };
    expect(value.numpy_was_imported, 'numpy came with the checkpoint').to.equal(true);
    for (const { response } of result.responses)
      expect(response.ids?.checkpointId).to.equal('ckpt-numpy');
  });

  it('a cold start imports numpy itself and reports no checkpoint', async () => {
    const result = await execute(harness.client, header({}), jsonCall(DRAW, 'draw'));
    expect(
      (envelopeOf(result).value as { numpy_was_imported: boolean }).numpy_was_imported,
    ).to.equal(false);
    for (const { response } of result.responses) expect(response.ids?.checkpointId).to.equal('');
  });

  it("reseeds numpy's global generator in each restored container: siblings draw different numbers", async () => {
    const draws = await Promise.all(
      [1, 2, 3].map(async () => {
        const result = await execute(
          harness.client,
          header({ ids: { checkpointId: 'ckpt-numpy' } }),
          jsonCall(DRAW, 'draw'),
        );
        expect(result.ids?.checkpointId).to.equal('ckpt-numpy');
        return envelopeOf(result).value as { random: number; numpy: number };
      }),
    );
    // The numpy draws are the test: numpy's generator is copied by the fork and only the
    // executor's reseed makes siblings differ. The `random` draws would differ even without that
    // reseed (CPython reseeds `random` in every forked child), so they only check nothing undid it.
    expect(new Set(draws.map((draw) => draw.numpy)).size).to.equal(3);
    expect(new Set(draws.map((draw) => draw.random)).size).to.equal(3);
  });

  it('falls back to a cold start for a checkpoint that could not be built, and says why', async () => {
    const result = await execute(
      harness.client,
      header({ ids: { checkpointId: 'ckpt-broken' } }),
      jsonCall(DRAW, 'draw'),
    );
    expect(envelopeOf(result).ok).to.equal(true);
    for (const { response } of result.responses) expect(response.ids?.checkpointId).to.equal('');
    const notes = logText(result, LogSource.LOG_SOURCE_SYSTEM);
    expect(notes.join('\n')).to.match(
      /checkpoint ckpt-broken was not restored \(.*not held.*\); the container started cold/,
    );
  });

  it('builds a checkpoint with a setup on demand; calls reach what it defined as readie_checkpoint', async () => {
    await harness.worker.buildCheckpoint({
      id: 'ckpt-setup',
      modules: [],
      setup: 'import os\nanswer = 6 * 7\nbuilt_by = os.getpid()\n',
    });
    expect(harness.worker.checkpointTiers().at(-1)).to.deep.equal({
      checkpointId: 'ckpt-setup',
      resident: true,
      cached: false,
    });
    const ANSWER = py`
      def answer():
          import readie_checkpoint
          return readie_checkpoint.answer
    `;
    const result = await execute(
      harness.client,
      header({ ids: { checkpointId: 'ckpt-setup' } }),
      jsonCall(ANSWER, 'answer'),
    );
    expect(envelopeOf(result).value).to.equal(42);
    expect(result.ids?.checkpointId).to.equal('ckpt-setup');
  });

  it('a checkpoint whose setup raises is not built, and says why', async () => {
    let failure: Error | null = null;
    await harness.worker
      .buildCheckpoint({
        id: 'ckpt-bad-setup',
        modules: [],
        setup: 'raise ValueError("no weights")\n',
      })
      .catch((error: Error) => (failure = error));
    expect(String(failure)).to.include('ValueError: no weights');
    expect(harness.worker.backend!.held()).to.not.include('ckpt-bad-setup');
  });

  it("dropping a template's resident tier leaves nothing to restore from: calls start cold", async () => {
    const backend = harness.worker.backend!;
    expect(await backend.residentBytes('ckpt-numpy')).to.be.greaterThan(
      (await backend.residentBytes('ckpt-setup')) + 5 * 1024 * 1024,
      'numpy costs the template memory',
    );
    expect(await backend.residentBytes('ckpt-setup')).to.be.greaterThan(1024 * 1024);
    await harness.worker.dropResident('ckpt-setup');
    expect(backend.held()).to.not.include('ckpt-setup');
    expect(await backend.residentBytes('ckpt-setup')).to.equal(0);
    const result = await execute(
      harness.client,
      header({ ids: { checkpointId: 'ckpt-setup' } }),
      jsonCall(DRAW, 'draw'),
    );
    expect(result.ids?.checkpointId).to.equal('');
    expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.match(
      /not held.*started cold/,
    );
  });

  it("falls back to a cold start when the checkpoint's template died, and reports its checkpoints again", async () => {
    const backend = harness.worker.backend as unknown as {
      templates: Map<string, { pid: number; exited: Promise<void> }>;
    };
    const template = backend.templates.get('checkpoint_0')!;
    const statusesBefore = harness.router.statuses().length;
    process.kill(template.pid, 'SIGKILL');
    await template.exited;
    await harness.router.waitFor(() => harness.router.statuses().length > statusesBefore);
    expect(harness.router.statuses()[statusesBefore]!.checkpoints).to.deep.equal(['ckpt-numpy']);
    const result = await execute(
      harness.client,
      header({ ids: { checkpointId: 'checkpoint_0' } }),
      jsonCall(DRAW, 'draw'),
    );
    expect(envelopeOf(result).ok).to.equal(true);
    expect(result.ids?.checkpointId).to.equal('');
    expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.include('started cold');
  });
});

describe('checkpoints: a restored container that dies before its HELLO', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    // No standbys: the call itself restores, so the restore it kills is the call's own.
    harness = await startHarness({ catalogue: CATALOGUE, flags: { standby: '0' } });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('falls back to a cold start, reports the container as cold, and says why', async () => {
    const backend = harness.worker.backend!;
    const restore = backend.restore.bind(backend);
    let killed = 0;
    backend.restore = async (checkpointId, spec) => {
      const child = await restore(checkpointId, spec);
      process.kill(child.pid, 'SIGKILL');
      killed += 1;
      return child;
    };
    try {
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-numpy' } }),
        jsonCall(DRAW, 'draw'),
      );
      expect(killed).to.equal(1);
      expect(envelopeOf(result).ok).to.equal(true);
      expect(
        (envelopeOf(result).value as { numpy_was_imported: boolean }).numpy_was_imported,
      ).to.equal(false);
      for (const { response } of result.responses) expect(response.ids?.checkpointId).to.equal('');
      const notes = logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n');
      expect(notes).to.match(
        /checkpoint ckpt-numpy was not restored \(the container died before its executor answered: .*SIGKILL.*\); the container started cold/,
      );
    } finally {
      backend.restore = restore;
    }
  });
});
