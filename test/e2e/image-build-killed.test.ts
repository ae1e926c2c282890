/**
 * A worker process SIGKILLed in the middle of an image's build (its modules importing in the
 * build container) leaves no half image: only its `+building-` directory, which the next start
 * of a worker on that state directory removes.
 */
import { expect } from 'chai';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ReadieClient } from '../../src/client/index.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import { runReadie, type Child } from '../support/processes.js';
import { buildWheel, PYTHON } from '../support/python.js';
import { eventually, startTestRouter, type TestRouter } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { startHarness, type Harness } from '../support/worker-harness.js';

describe('a worker SIGKILLed mid-build (real worker process)', function () {
  this.timeout(180_000);
  let router: TestRouter;
  let worker: Child | undefined;
  let restarted: Harness | undefined;

  after(async () => {
    worker?.process.kill('SIGKILL');
    await worker?.exited;
    await restarted?.stop();
    await router?.close();
    cleanTempDirs();
  });

  it('leaves only the build directory, which the next start removes; no image is half there', async () => {
    const dir = tempDir('img-killed-');
    const wheels = buildWheel(dir, 'readie_slowimport', 'import time\ntime.sleep(120)\n');
    router = await startTestRouter();
    const workerId = `img-killed-${process.pid}`;
    worker = runReadie([
      'worker',
      ...['--router', router.address, '--listen', '127.0.0.1:0', '--id', workerId],
      ...['--state-dir', join(dir, 'state'), '--python', PYTHON, '--wheel-dir', wheels],
      ...['--insecure', '--auth', 'none', '--restore-backend', 'template'],
      ...['--memory', '8GiB', '--flavor', 'cpu'],
    ]);
    await eventually(
      () => router.router.state.workers.get(workerId)?.status === 'ready',
      'the worker to register',
      120_000,
    );
    const client = new ReadieClient({ address: router.address, insecure: true });
    const call = client.start(
      { source: 'def f():\n    return 1\n', function: 'f' },
      { image: { packages: ['readie_slowimport==1.0'], imports: ['readie_slowimport'] } },
    );
    call.result.catch(() => undefined);
    // Untenanted calls share the tenant "".
    const tenantDir = join(dir, 'state', 'images', tenantTag(''));
    const building = () =>
      existsSync(tenantDir) ? readdirSync(tenantDir).filter((name) => name.startsWith('+')) : [];
    // Installed, now importing (the import sleeps): the build is as far as it gets.
    await eventually(
      () =>
        building().some((name) =>
          existsSync(
            join(
              tenantDir,
              name,
              'prefix',
              'local',
              'lib',
              'python3.11',
              'dist-packages',
              'readie_slowimport',
            ),
          ),
        ),
      'the build to reach its imports',
      90_000,
    );
    worker.process.kill('SIGKILL');
    await worker.exited;
    worker = undefined;
    client.close();
    expect(readdirSync(tenantDir).filter((name) => !name.startsWith('+'))).to.deep.equal([]);
    expect(building()).to.have.length(1);

    restarted = await startHarness({ stateDir: dir, flags: { wheelDir: wheels } });
    expect(readdirSync(tenantDir)).to.deep.equal([]);
    expect(restarted.worker.images!.list()).to.deep.equal([]);
  });
});
