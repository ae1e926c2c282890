import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReadieClient } from '../../src/client/index.js';
import { prefixOf } from '../../src/worker/images/image-files.js';
import { imageBytes } from '../../src/worker/images/image-store.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import {
  eventually,
  readLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import type { ScriptedRouter } from '../support/scripted-router.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { startHarness, type Harness } from '../support/worker-harness.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));
const ACME = 'acme-token-for-images-0123456789';
const GLOBEX = 'globex-token-for-images-0123456789';
const W1 = 'worker-token-for-images-0123456789';
const A0 = 'worker-a0-token-for-images-0123456789';
const ROUTER = 'router-token-for-images-0123456789';
const OPERATOR = 'operator-token-for-images-0123456789';

/**
 * A tiny pure-Python wheel (tomli_w, about 7 KB, no dependencies, absent from Debian's Python),
 * fetched through pip's own configuration on this host, as a worker without --package-index does.
 */
const IMAGE = { packages: ['tomli-w==1.2.0'], imports: ['tomli_w'] };

/** Two calls of one function with an image, through the Python client; their CallInfo. */
const PYTHON_CLIENT = `
import json, readie

image = readie.Image(packages=["tomli-w==1.2.0"], imports=["tomli_w"], env={"IMAGE_MODE": "e2e"})

@readie.remote(image=image, stream_logs=False)
def dump(value):
    import os, sys, tomli_w
    return [tomli_w.dumps(value), tomli_w.__file__, os.environ["IMAGE_MODE"], "tomli_w" in sys.modules]

for _ in range(2):
    result = dump({"a": 1})
    info = readie.last_call()
    print(json.dumps({"result": result, "worker": info.worker_id, "checkpoint": info.checkpoint_id}))
`;

function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

describe('images end to end: built once per worker and tenant, from the host package source', function () {
  this.timeout(240_000);
  let test: TestRouter;
  let worker: Harness;
  let operatorFile: string;
  let tokensFile: string;
  let routerTokenFile: string;
  let workerTokenFile: string;
  let routerDigestFile: string;
  /** The name (`image:` + 16 hex) of acme's image, once the first case built it. */
  let acmeImage = '';

  before(async () => {
    const dir = tempDir('readie-images-e2e-');
    operatorFile = secret(dir, 'operator.token', OPERATOR);
    tokensFile = secret(
      dir,
      'tokens',
      `tenant acme ${ACME}\ntenant globex ${GLOBEX}\noperator ops ${OPERATOR}\nworker img-w1 ${W1}\nworker img-a0 ${A0}`,
    );
    routerTokenFile = secret(dir, 'router.token', ROUTER);
    workerTokenFile = secret(dir, 'w1.token', W1);
    routerDigestFile = secret(dir, 'router.sha256', tokenDigest(ROUTER));
    test = await startTestRouter({ auth: { mode: 'tokens', tokensFile, routerTokenFile } });
    worker = await startImageWorker();
  });

  /** img-w1 reporting to `test` (a restart keeps `stateDir`, its images on disk). */
  function startImageWorker(stateDir?: string): Promise<Harness> {
    return startHarness({
      router: { address: test.address } as ScriptedRouter,
      ...(stateDir === undefined ? {} : { stateDir }),
      flags: {
        id: 'img-w1',
        // CRIU where it works here (as `npm start` runs): images then restore from snapshots.
        restoreBackend: 'auto',
        auth: 'tokens',
        tokenFile: workerTokenFile,
        routerTokenFile: routerDigestFile,
      },
    });
  }

  after(async () => {
    await worker?.stop();
    await test?.close();
    cleanTempDirs();
  });

  it('first call builds, the second restores it (checkpoint_id names the image), a second tenant builds its own', async () => {
    const output = await new Promise<string>((resolve, reject) =>
      execFile(
        PYTHON,
        ['-c', PYTHON_CLIENT],
        {
          env: {
            PATH: process.env['PATH'] ?? '/usr/bin:/bin',
            PYTHONPATH: PYTHON_ROOT,
            READIE_ADDRESS: test.address,
            READIE_INSECURE: '1',
            READIE_AUTH_TOKEN: ACME,
          },
        },
        (error, stdout, stderr) =>
          error ? reject(new Error(stderr || error.message)) : resolve(stdout),
      ),
    );
    const [first, second] = output
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { result: unknown[]; worker: string; checkpoint: string });
    expect(first!.result).to.deep.equal([
      'a = 1\n',
      '/tmp/.readie/image/local/lib/python3.11/dist-packages/tomli_w/__init__.py',
      'e2e',
      true,
    ]);
    expect(first!.checkpoint).to.match(/^image:[0-9a-f]{16}$/);
    expect(second!.checkpoint).to.equal(first!.checkpoint);
    expect(second!.worker).to.equal('img-w1');
    const acme = worker.worker.images!.list();
    expect(acme).to.have.length(1);
    expect(acme[0]!.manifest.tenantId).to.equal('acme');
    // On CRIU (CI's backend) the second call's container came from the image's snapshot.
    if (worker.worker.backend?.imageSnapshots) expect(acme[0]!.snapshot).to.not.equal(null);
    expect(acme[0]!.manifest.wheels.map((wheel) => wheel.file)).to.deep.equal([
      'tomli_w-1.2.0-py3-none-any.whl',
    ]);
    // Compiled at the build, and still valid for its source once sealed (the header's source
    // mtime and size match): every later container imports it from a read-only prefix, where
    // Python could neither write a new one nor use a stale one.
    const module = join(prefixOf(acme[0]!.dir), 'local/lib/python3.11/dist-packages/tomli_w');
    const pyc = readFileSync(join(module, '__pycache__', '__init__.cpython-311.pyc'));
    const source = statSync(join(module, '__init__.py'));
    expect(pyc.readUInt32LE(4), 'a timestamp-based .pyc').to.equal(0);
    expect([pyc.readUInt32LE(8), pyc.readUInt32LE(12)]).to.deep.equal([
      Math.floor(source.mtimeMs / 1000),
      source.size,
    ]);

    // Another tenant, the same declaration (without the variable: another image), its own build.
    const globex = new ReadieClient({ address: test.address, insecure: true, token: GLOBEX });
    try {
      const call = globex.start<string>(
        { source: 'import tomli_w\ndef f():\n    return tomli_w.dumps({"b": 2})\n', function: 'f' },
        { image: IMAGE },
      );
      expect(await call.result).to.equal('b = 2\n');
      expect(call.info.checkpointId).to.match(/^image:[0-9a-f]{16}$/);
    } finally {
      globex.close();
    }
    const tenants = worker.worker
      .images!.list()
      .map((image) => image.manifest.tenantId)
      .sort();
    expect(tenants).to.deep.equal(['acme', 'globex']);

    // The router's log holds each build, as the worker reported it.
    const builtEvents = () =>
      readLog(test.logDir).flatMap((event) => (event.type === 'ImageBuilt' ? [event] : []));
    await eventually(() => builtEvents().length === 2, 'both builds in the log');
    const built = builtEvents();
    expect(built.map((event) => [event.workerId, event.tenantId, event.cause])).to.deep.equal([
      ['img-w1', 'acme', 'report:img-w1'],
      ['img-w1', 'globex', 'report:img-w1'],
    ]);
    expect(built[0]!.imageId.slice(0, 16)).to.equal(first!.checkpoint.slice('image:'.length));
    acmeImage = first!.checkpoint;
  });

  /** `readie ARGS` against the router with the operator's token: exit code, stdout, stderr. */
  async function readie(
    ...args: string[]
  ): Promise<{ code: number | null; out: string; err: string }> {
    const child = runReadie([
      ...args,
      '--router',
      test.address,
      '--insecure',
      '--token-file',
      operatorFile,
    ]);
    const { code } = await child.exited;
    return { code, out: child.lines.join('\n'), err: child.stderr() };
  }

  /** `Image.status()` of the Python client for a tenant's token: its entries. */
  function pythonStatus(
    token: string,
    env: string,
  ): Promise<{ worker_id: string; name: string; bytes: number }[]> {
    const script = `
import dataclasses, json, readie
image = readie.Image(packages=["tomli-w==1.2.0"], imports=["tomli_w"], env=${env})
print(json.dumps([dataclasses.asdict(entry) for entry in image.status()]))
`;
    return new Promise((resolve, reject) =>
      execFile(
        PYTHON,
        ['-c', script],
        {
          env: {
            PATH: process.env['PATH'] ?? '/usr/bin:/bin',
            PYTHONPATH: PYTHON_ROOT,
            READIE_ADDRESS: test.address,
            READIE_INSECURE: '1',
            READIE_AUTH_TOKEN: token,
          },
        },
        (error, stdout, stderr) =>
          error ? reject(new Error(stderr || error.message)) : resolve(JSON.parse(stdout) as never),
      ),
    );
  }

  it('seen and managed: readie images and status (operator), Image.status() (a tenant sees its own alone), readie image rm', async () => {
    expect(acmeImage, "the first case built acme's image").to.not.equal('');
    const held = worker.worker.images!.list();
    const acmeHeld = held.find((image) => image.manifest.tenantId === 'acme')!;

    // The operator sees every tenant's image, where it is, its size, and each worker's cache.
    const listing = await readie('images');
    expect(listing.code, listing.err).to.equal(0);
    const rows = listing.out.split('\n');
    expect(rows[1]).to.match(
      /^│ IMAGE\s+│ TENANT\s+│ WORKER\s+│ SIZE\s+│ LAST USE\s+│ IN USE\s+│$/,
    );
    expect(rows.filter((row) => row.startsWith('│ image:'))).to.have.length(2);
    expect(listing.out).to.match(
      new RegExp(`${acmeImage} │ "acme"\\s+│ img-w1\\s+│ \\d+(?:KiB|MiB)\\s+│ \\d+s ago\\s+│ 0 `),
    );
    expect(listing.out).to.match(/image caches:\n\s+img-w1\s+2 images, \d+(?:KiB|MiB) of 10GiB/);
    const onlyGlobex = await readie('images', '--tenant', 'globex', '--json');
    expect(onlyGlobex.code, onlyGlobex.err).to.equal(0);
    const globexImages = (
      JSON.parse(onlyGlobex.out) as { images: { tenantId: string; bytes: number }[] }
    ).images;
    expect(globexImages.map((image) => image.tenantId)).to.deep.equal(['globex']);
    expect(globexImages[0]!.bytes).to.be.greaterThan(0);
    const status = await readie('status');
    expect(status.code, status.err).to.equal(0);
    expect(status.out).to.match(/image caches:\n\s+img-w1\s+2 images/);

    // A tenant sees where its own declaration is built; the same declaration under another
    // tenant's credential finds nothing (its build is its own), and a listing never crosses.
    const acmeStatus = await pythonStatus(ACME, '{"IMAGE_MODE": "e2e"}');
    expect(acmeStatus.map((entry) => [entry.worker_id, entry.name, entry.bytes])).to.deep.equal([
      ['img-w1', acmeImage, imageBytes(acmeHeld)],
    ]);
    expect(await pythonStatus(GLOBEX, '{"IMAGE_MODE": "e2e"}')).to.deep.equal([]);
    const globex = new ReadieClient({ address: test.address, insecure: true, token: GLOBEX });
    try {
      const own = await globex.imageStatus(IMAGE);
      expect(own.map((image) => [image.tenantId, image.workerId])).to.deep.equal([
        ['globex', 'img-w1'],
      ]);
      expect((await globex.imageStatus()).map((image) => image.tenantId)).to.deep.equal(['globex']);
    } finally {
      globex.close();
    }

    // Removal: bad input is named; another tenant's image is not found; then it is removed.
    const bad = await readie('image', 'rm', 'not-a-hash');
    expect([bad.code, bad.err]).to.satisfy(
      ([code, err]: [number, string]) =>
        code === 1 && /INVALID_ARGUMENT/.test(err) && /64 hex digits/.test(err),
    );
    const unknown = await readie('image', 'rm', 'image:0000000000000000');
    expect(unknown.code).to.equal(1);
    expect(unknown.err).to.match(
      /NOT_FOUND.*no worker that is up holds image image:0000000000000000/,
    );
    const crossed = await readie('image', 'rm', acmeImage, '--tenant', 'globex');
    expect(crossed.code).to.equal(1);
    expect(crossed.err).to.match(/NOT_FOUND.*of tenant "globex"/);
    const noWorker = await readie('image', 'rm', acmeImage, '--worker', 'nope');
    expect(noWorker.code).to.equal(1);
    expect(noWorker.err).to.match(/NOT_FOUND.*no worker nope is up \(workers up: img-w1\)/);
    const removed = await readie('image', 'rm', acmeImage, '--tenant', 'acme');
    expect(removed.code, removed.err).to.equal(0);
    expect(removed.out).to.match(
      new RegExp(`^removed ${acmeImage} of tenant "acme" from img-w1 \\(\\d+(?:KiB|MiB)\\)$`),
    );
    expect(worker.worker.images!.list().map((image) => image.manifest.tenantId)).to.deep.equal([
      'globex',
    ]);
    await eventually(
      () =>
        readLog(test.logDir).some(
          (event) =>
            event.type === 'ImageRemoved' &&
            event.tenantId === 'acme' &&
            event.reason === 'removed',
        ),
      'the removal in the log',
    );
    expect(await pythonStatus(ACME, '{"IMAGE_MODE": "e2e"}')).to.deep.equal([]);
  });

  it('a restarted worker reports the images it found: a router that lost them lists them again and places their calls on it', async () => {
    const held = worker.worker.images!.list().map((image) => image.manifest);
    expect(held.map((image) => image.tenantId)).to.deep.equal(['globex']);
    const globexBuild = readLog(test.logDir).flatMap((event) =>
      event.type === 'ImageBuilt' && event.tenantId === 'globex' ? [event] : [],
    );
    expect(globexBuild).to.have.length(1);
    await worker.stop();
    // The router loses everything it knew (a new log), then the worker starts again on its disk.
    await test.close();
    test = await startTestRouter({ auth: { mode: 'tokens', tokensFile, routerTokenFile } });
    // A worker that ranks first without images: as empty, more memory, its ID sorts first.
    const other = await ScriptedWorker.start({ workerId: 'img-a0' });
    try {
      other.connect(test.address, { token: A0 });
      await other.reportStatus();
      worker = await startImageWorker(worker.stateDir);
      await eventually(
        () => readLog(test.logDir).some((event) => event.type === 'ImageBuilt'),
        'the images the worker found, in the new log',
      );
      const found = readLog(test.logDir).flatMap((event) =>
        event.type === 'ImageBuilt' ? [event] : [],
      );
      expect(
        found.map((event) => [event.workerId, event.tenantId, event.imageId, event.cause]),
      ).to.deep.equal([['img-w1', 'globex', held[0]!.id, 'report:img-w1']]);
      expect(found[0]!.declarations).to.deep.equal(globexBuild[0]!.declarations);

      const listing = await readie('images', '--tenant', 'globex', '--json');
      expect(listing.code, listing.err).to.equal(0);
      const listed = (JSON.parse(listing.out) as { images: { workerId: string; name: string }[] })
        .images;
      expect(listed.map((image) => [image.workerId, image.name])).to.deep.equal([
        ['img-w1', `image:${held[0]!.id.slice(0, 16)}`],
      ]);

      // globex's call goes to the worker holding its image (the ranking alone picks img-a0).
      const globex = new ReadieClient({ address: test.address, insecure: true, token: GLOBEX });
      try {
        const call = globex.start<string>(
          {
            source: 'import tomli_w\ndef f():\n    return tomli_w.dumps({"c": 3})\n',
            function: 'f',
          },
          { image: IMAGE },
        );
        expect(await call.result).to.equal('c = 3\n');
        expect(call.info.workerId).to.equal('img-w1');
        expect(call.info.checkpointId).to.equal(`image:${held[0]!.id.slice(0, 16)}`);
      } finally {
        globex.close();
      }
      expect(other.calls).to.have.length(0);
      // Found, not built: the worker's log of this call says no build ran.
      expect(
        readLog(test.logDir).filter((event) => event.type === 'ImageBuilt'),
        'no second build',
      ).to.have.length(1);
    } finally {
      other.stop();
    }
  });
});
