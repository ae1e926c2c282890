import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ReadieClient } from '../../src/client/index.js';
import { place } from '../../src/core/placement/index.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import {
  readLog,
  settledLog,
  startTestRouter,
  eventually,
  type TestRouter,
} from '../support/router/harness.js';
import { demand } from '../support/events.js';
import type { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { startHarness, type Harness } from '../support/worker-harness.js';

const ACME = 'acme-token-for-image-placement-0123';
const GLOBEX = 'globex-token-for-image-placement-01';
const WA = 'worker-a-token-for-image-placement-0';
const WB = 'worker-b-token-for-image-placement-0';
const ROUTER = 'router-token-for-image-placement-01';

/** A tiny pure-Python wheel (see images.test.ts), fetched through pip's configuration. */
const IMAGE = { packages: ['tomli-w==1.2.0'], imports: ['tomli_w'] };
const SOURCE = {
  source: 'import tomli_w\ndef f():\n    return tomli_w.dumps({"a": 1})\n',
  function: 'f',
};

function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

describe('images end to end: placement prefers the worker that holds the image (rules v8)', function () {
  this.timeout(240_000);
  let test: TestRouter;
  const workers: Harness[] = [];
  let dir: string;

  async function startWorker(id: string, token: string): Promise<Harness> {
    const worker = await startHarness({
      router: { address: test.address } as ScriptedRouter,
      flags: {
        id,
        auth: 'tokens',
        tokenFile: secret(dir, `${id}.token`, token),
        routerTokenFile: secret(dir, `${id}.router.sha256`, tokenDigest(ROUTER)),
      },
    });
    workers.push(worker);
    return worker;
  }

  async function callAs(token: string): Promise<string> {
    const client = new ReadieClient({ address: test.address, insecure: true, token });
    try {
      const call = client.start<string>(SOURCE, { image: IMAGE });
      expect(await call.result).to.equal('a = 1\n');
      expect(call.info.checkpointId).to.match(/^image:[0-9a-f]{16}$/);
      return call.info.workerId;
    } finally {
      client.close();
    }
  }

  before(async () => {
    dir = tempDir('readie-image-placement-');
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: secret(
          dir,
          'tokens',
          `tenant acme ${ACME}\ntenant globex ${GLOBEX}\nworker img-b ${WB}\nworker img-a ${WA}`,
        ),
        routerTokenFile: secret(dir, 'router.token', ROUTER),
      },
    });
  });

  after(async () => {
    for (const worker of workers) await worker.stop();
    await test?.close();
    cleanTempDirs();
  });

  it("a tenant's second call goes to the worker that built its image, not the one the ranking prefers", async () => {
    // img-b alone: acme's first call builds the image there.
    await startWorker('img-b', WB);
    expect(await callAs(ACME)).to.equal('img-b');
    const built = () =>
      readLog(test.logDir).flatMap((event) => (event.type === 'ImageBuilt' ? [event] : []));
    await eventually(() => built().length === 1, 'the build in the log');
    expect(built()[0]!.declarations).to.have.length(1);

    // img-a joins, empty: the ranking puts it first (less memory in use, and its ID sorts first).
    await startWorker('img-a', WA);
    await eventually(
      () => test.router.state.workers.get('img-a')?.status === 'ready',
      'img-a registered',
    );
    // Without its image, a call of acme's would go to img-a now.
    const withoutImage = place(test.router.state, {
      requestId: 'probe',
      sessionId: null,
      tenantId: 'acme',
      demand: demand(),
      imageKey: null,
    });
    expect(withoutImage).to.deep.include({ outcome: 'placed', workerId: 'img-a' });
    // acme's second call: restored on the worker that holds its image.
    expect(await callAs(ACME)).to.equal('img-b');
    // Another tenant's same declaration is another image: no holder, the ranking's choice.
    expect(await callAs(GLOBEX)).to.equal('img-a');
    const requested = (await settledLog(test)).flatMap((event) =>
      event.type === 'CallRequested' ? [event.imageKey] : [],
    );
    expect(requested).to.have.length(3);
    expect(requested[1]).to.equal(requested[0]);
    expect(requested[2])
      .to.match(/^[0-9a-f]{64}$/)
      .and.not.equal(requested[0]);
    expect(built()[0]!.declarations).to.deep.equal([requested[0]]);
  });
});
