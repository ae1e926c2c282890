import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Metadata, status } from '@grpc/grpc-js';
import { ReadieClient } from '../../src/client/index.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { RegistrationError } from '../../src/worker/registry/index.js';
import {
  bearer,
  eventually,
  readLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import type { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const TENANT = 'tenant-token-for-real-workers-0123';
const W1 = 'worker-one-token-for-real-workers-0123';
const W2 = 'worker-two-token-for-real-workers-0123';
const ROUTER = 'router-token-for-real-workers-0123';
const CALL = jsonCall('def f():\n    return 1\n', 'f');

/** A file holding `text`, 0600, in `dir`. */
function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

describe('credentials between a real router and real workers', function () {
  this.timeout(120_000);
  let test: TestRouter;
  let dir: string;
  const harnesses: Harness[] = [];

  before(async () => {
    dir = tempDir('readie-cred-e2e-');
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: secret(
          dir,
          'tokens',
          `tenant acme ${TENANT}\nworker cred-w1 ${tokenDigest(W1)}\nworker cred-w2 ${W2}`,
        ),
        routerTokenFile: secret(dir, 'router.token', ROUTER),
      },
    });
  });

  after(async () => {
    await Promise.all(harnesses.map((harness) => harness.stop()));
    await test.close();
    cleanTempDirs();
  });

  /** Starts a real worker registering with the router under `id` with `token`. */
  async function worker(id: string, token: string): Promise<Harness> {
    const harness = await startHarness({
      router: { address: test.address } as ScriptedRouter,
      flags: {
        id,
        auth: 'tokens',
        tokenFile: secret(dir, `${id}-${tokenDigest(token).slice(7, 15)}.token`, token),
        // The worker holds the router's digest, not the token itself.
        routerTokenFile: secret(dir, 'router.sha256', tokenDigest(ROUTER)),
      },
    });
    harnesses.push(harness);
    return harness;
  }

  it("refuses a worker presenting a client's token, or another worker's ID: PERMISSION_DENIED, nothing logged", async () => {
    const lastSeq = test.router.state.lastSeq;
    const asTenant = await worker('cred-w1', TENANT).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(asTenant).to.be.instanceOf(RegistrationError);
    expect(asTenant?.message).to.include(
      'a tenant credential (tenant acme) may not call readie.v1.RegistryService',
    );
    const asOther = await worker('cred-w1', W2).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(asOther).to.be.instanceOf(RegistrationError);
    expect(asOther?.message).to.include(
      'a worker credential (worker cred-w2) may not report as worker "cred-w1"',
    );
    expect(test.router.state.lastSeq).to.equal(lastSeq);
    expect(test.router.state.workers.has('cred-w1')).to.equal(false);
    expect(readLog(test.logDir).some((e) => 'workerId' in e && e.workerId === 'cred-w1')).to.equal(
      false,
    );
  });

  it("registers a worker with its own credential; its ExecutionService takes the router's token alone", async () => {
    const harness = await worker('cred-w1', W1);
    expect(test.router.state.workers.get('cred-w1')?.status).to.equal('ready');
    // A tenant's call goes through the router and runs there.
    const client = new ReadieClient({
      address: test.address,
      insecure: true,
      token: TENANT,
      env: {},
    });
    try {
      expect(await client.call({ module: 'math', function: 'hypot', args: [3, 4] })).to.equal(5);
    } finally {
      client.close();
    }
    await eventually(
      () => readLog(test.logDir).some((e) => e.type === 'CallFinished'),
      'the call in the log',
    );
    const requested = readLog(test.logDir).filter((e) => e.type === 'CallRequested');
    expect(requested.map((e) => (e.type === 'CallRequested' ? e.tenantId : ''))).to.deep.equal([
      'acme',
    ]);
    // Straight to the worker: the client's token, the worker's own, none: refused.
    const refusals: [Metadata, number][] = [
      [bearer(TENANT), status.UNAUTHENTICATED],
      [bearer(W1), status.PERMISSION_DENIED],
      [bearer(W2), status.UNAUTHENTICATED],
      [new Metadata(), status.UNAUTHENTICATED],
    ];
    for (const [metadata, code] of refusals) {
      const result = await execute(harness.client, header({}), CALL, { metadata });
      expect(result.code, result.details).to.equal(code);
    }
    const accepted = await execute(harness.client, header({}), CALL, { metadata: bearer(ROUTER) });
    expect(accepted.code, accepted.details).to.equal(status.OK);
    expect(envelopeOf(accepted).value).to.equal(1);
  });
});
