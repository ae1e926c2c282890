import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { ImageOutcome } from '../../src/proto/gen/readie/v1/registry.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import { buildWheel } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type CallResult,
  type Harness,
} from '../support/worker-harness.js';

const USE = py`
  def use():
      import os, sys, readie_imgpkg
      return [readie_imgpkg.greet("image"), readie_imgpkg.__file__, os.environ.get("GREETING"), "readie_imgpkg" in sys.modules]
`;

const IMAGE = {
  packages: ['readie_imgpkg==1.0'],
  imports: ['readie_imgpkg'],
  env: { GREETING: 'hi' },
};

/** The checkpoint the call's last answer names (log lines before the image was known name none). */
function lastCheckpoint(result: CallResult): string {
  return result.responses.at(-1)?.response.ids?.checkpointId ?? '';
}

describe('images on a worker', function () {
  this.timeout(120_000);
  let harness: Harness;
  let wheels: string;
  before(async () => {
    const dir = tempDir('rw-img-wheels-');
    wheels = buildWheel(dir, 'readie_imgpkg', 'def greet(who):\n    return f"hello {who}"\n');
    buildWheel(dir, 'readie_badimport', 'raise RuntimeError("refuses to import")\n');
    harness = await startHarness({ flags: { wheelDir: wheels } });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('builds an image once in a sandboxed container, then later calls restore it without installing', async () => {
    const first = await execute(
      harness.client,
      header({ image: IMAGE, tenantId: 'tenant-a' }),
      jsonCall(USE, 'use'),
    );
    expect(first.code, first.details).to.equal(status.OK);
    const [greeting, file, env, imported] = envelopeOf(first).value as [
      string,
      string,
      string,
      boolean,
    ];
    expect(greeting).to.equal('hello image');
    expect(file).to.match(/^\/tmp\/\.readie\/image\//);
    expect(env).to.equal('hi');
    expect(imported).to.equal(true);
    const system = logText(first, LogSource.LOG_SOURCE_SYSTEM).join('\n');
    expect(system).to.include(
      'image: installing readie_imgpkg==1.0 in a sandboxed build container',
    );
    expect(system).to.match(/image: built image:[0-9a-f]{16}/);
    const name = lastCheckpoint(first);
    expect(name).to.match(/^image:[0-9a-f]{16}$/);

    const second = await execute(
      harness.client,
      header({ image: IMAGE, tenantId: 'tenant-a' }),
      jsonCall(USE, 'use'),
    );
    expect(second.code, second.details).to.equal(status.OK);
    expect(lastCheckpoint(second)).to.equal(name);
    expect(logText(second, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.not.include('image:');
    expect((envelopeOf(second).value as unknown[])[0]).to.equal('hello image');

    // On disk: one whole image, root's and read-only, under the tenant's tag; no build leftovers.
    const tenantDir = join(harness.stateDir, 'state', 'images', tenantTag('tenant-a'));
    const entries = readdirSync(tenantDir);
    expect(entries).to.have.length(1);
    expect(entries[0]!.startsWith(name.slice('image:'.length))).to.equal(true);
    const prefix = join(tenantDir, entries[0]!, 'prefix');
    expect(statSync(prefix).uid).to.equal(0);
    expect(statSync(prefix).mode & 0o022).to.equal(0);
    const built = await harness.router.waitFor(
      (r) => r.kind === 'image' && r.request.outcome === ImageOutcome.IMAGE_OUTCOME_BUILT,
    );
    expect(built.kind === 'image' && built.request.imageId.slice(0, 16)).to.equal(
      name.slice('image:'.length),
    );
  });

  it("never lends one tenant's image to another: the same declaration builds again for tenant B", async () => {
    const other = await execute(
      harness.client,
      header({ image: IMAGE, tenantId: 'tenant-b' }),
      jsonCall(USE, 'use'),
    );
    expect(other.code, other.details).to.equal(status.OK);
    expect(logText(other, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.match(/image: built/);
    const images = harness.worker.images!.list();
    const tenants = images.map((image) => image.manifest.tenantId).sort();
    expect(tenants).to.deep.equal(['tenant-a', 'tenant-b']);
    // Same content, same identity: but two images, one per tenant.
    expect(images[0]!.manifest.id).to.equal(images[1]!.manifest.id);
    expect(images[0]!.dir).to.not.equal(images[1]!.dir);
  });

  it('concurrent calls for an image being built wait for that one build', async () => {
    const image = {
      packages: ['readie_imgpkg==1.0'],
      imports: ['readie_imgpkg'],
      env: { GREETING: 'c' },
    };
    const calls = await Promise.all(
      [1, 2, 3].map(() =>
        execute(harness.client, header({ image, tenantId: 'tenant-c' }), jsonCall(USE, 'use')),
      ),
    );
    for (const call of calls) expect(call.code, call.details).to.equal(status.OK);
    const builds = calls.filter((call) =>
      logText(call, LogSource.LOG_SOURCE_SYSTEM).some((line) => line.startsWith('image: built')),
    );
    expect(builds).to.have.length(1);
    const waited = calls.filter((call) =>
      logText(call, LogSource.LOG_SOURCE_SYSTEM).includes(
        'image: waiting for its build on this worker',
      ),
    );
    expect(waited).to.have.length(2);
    expect(new Set(calls.map(lastCheckpoint)).size).to.equal(1);
  });

  it('a requirement with no wheel fails the call FAILED_PRECONDITION naming it and the installer error; nothing is kept', async () => {
    const failed = await execute(
      harness.client,
      header({
        image: { packages: ['readie-no-such-thing'], imports: [], env: {} },
        tenantId: 'tenant-a',
      }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(failed.code).to.equal(status.FAILED_PRECONDITION);
    expect(failed.details).to.include('readie-no-such-thing');
    expect(failed.details).to.match(/ERROR: (Could not find a version|No matching distribution)/);
    expect(failed.trailers).to.include({ 'readie-not-started': '1' });
    const tenantDir = join(harness.stateDir, 'state', 'images', tenantTag('tenant-a'));
    expect(readdirSync(tenantDir).filter((name) => name.startsWith('+'))).to.deep.equal([]);
    // The router hears of it (ImageBuildFailed in its log).
    const report = await harness.router.waitFor(
      (r) => r.kind === 'image' && r.request.outcome === ImageOutcome.IMAGE_OUTCOME_BUILD_FAILED,
    );
    expect(report.kind === 'image' && report.request).to.include({
      workerId: harness.workerId,
      tenantId: 'tenant-a',
    });
    expect(report.kind === 'image' && report.request.error).to.include('readie-no-such-thing');
  });

  it('an import that fails in the build names the module and its traceback', async () => {
    const failed = await execute(
      harness.client,
      header({
        image: { packages: ['readie_badimport==1.0'], imports: ['readie_badimport'], env: {} },
        tenantId: 'tenant-a',
      }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(failed.code).to.equal(status.FAILED_PRECONDITION);
    expect(failed.details).to.include(
      'importing readie_badimport failed: RuntimeError: refuses to import',
    );
    expect(failed.details).to.include('Traceback (most recent call last)');
  });

  it('a restarted worker keeps whole images, removes a killed build, and reports every image it found after its status', async () => {
    const stateDir = harness.stateDir;
    const tenantDir = join(stateDir, 'state', 'images', tenantTag('tenant-a'));
    const leftover = join(tenantDir, '+building-deadbeef');
    mkdirSync(join(leftover, 'prefix'), { recursive: true });
    writeFileSync(join(leftover, 'prefix', 'half.py'), 'x = 1\n');
    const kept = harness.worker
      .images!.list()
      .filter((image) => image.manifest.tenantId !== 'tenant-b')
      .map(({ manifest }) => ({
        tenantId: manifest.tenantId,
        imageId: manifest.id,
        bytes: manifest.bytes,
        declarations: manifest.declarations,
      }));
    expect(kept.map((image) => image.tenantId)).to.include('tenant-a');
    await harness.stop();
    // Deleted while the worker was down: its report must not list it.
    rmSync(join(stateDir, 'state', 'images', tenantTag('tenant-b')), { recursive: true });
    harness = await startHarness({ flags: { wheelDir: wheels }, stateDir });
    expect(existsSync(leftover)).to.equal(false);
    const held = await harness.router.waitFor((report) => report.kind === 'held-images');
    const request = held.kind === 'held-images' ? held.request : undefined;
    expect(request?.workerId).to.equal(harness.workerId);
    expect(request?.complete).to.equal(true);
    const byId = (
      a: { imageId: string; tenantId: string },
      b: { imageId: string; tenantId: string },
    ) => (`${a.tenantId}/${a.imageId}` < `${b.tenantId}/${b.imageId}` ? -1 : 1);
    expect([...(request?.images ?? [])].sort(byId)).to.deep.equal([...kept].sort(byId));
    const kinds = harness.router.reports.map((report) => report.kind);
    expect(kinds.indexOf('status'), 'after the status report').to.be.below(
      kinds.indexOf('held-images'),
    );
    const again = await execute(
      harness.client,
      header({ image: IMAGE, tenantId: 'tenant-a' }),
      jsonCall(USE, 'use'),
    );
    expect(again.code, again.details).to.equal(status.OK);
    expect(logText(again, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.not.include('image: built');
  });
});

describe('images on a worker with a small image cache', function () {
  this.timeout(120_000);
  let harness: Harness;
  before(async () => {
    const wheels = buildWheel(
      tempDir('rw-img-small-'),
      'readie_imgpkg',
      `BLOB = ${JSON.stringify('x'.repeat(8192))}\n`,
    );
    harness = await startHarness({ flags: { wheelDir: wheels, imageCacheSize: '4096' } });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('refuses an image larger than --image-cache-size, naming both sizes, and keeps nothing of it', async () => {
    const refused = await execute(
      harness.client,
      header({ image: { packages: ['readie_imgpkg==1.0'], imports: [], env: {} }, tenantId: 't' }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(refused.code).to.equal(status.FAILED_PRECONDITION);
    expect(refused.details).to.match(
      /the image is [0-9.]+ KiB, larger than this worker's image cache of 4\.0 KiB \(--image-cache-size\)/,
    );
    expect(harness.worker.images!.list()).to.deep.equal([]);
    expect(readdirSync(join(harness.stateDir, 'state', 'images', tenantTag('t')))).to.deep.equal(
      [],
    );
  });
});
