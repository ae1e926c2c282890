import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { healthStatus } from '../../src/net/health-client.js';
import { fold } from '../../src/projections/index.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { servingSecurityOf } from '../../src/router/index.js';
import {
  bearer,
  codeOf,
  readLog,
  run,
  startTestRouter,
  storyOf,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

function tlsFile(name: string): string {
  return fileURLToPath(new URL(`../support/tls/${name}`, import.meta.url));
}

const ca = readFileSync(tlsFile('ca.pem'));
const cert = readFileSync(tlsFile('server.pem'));
const key = readFileSync(tlsFile('server-key.pem'));
const TOKEN = 'correct horse battery staple';

describe('router: TLS and the bearer token', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter({
      security: servingSecurityOf({
        tlsCert: tlsFile('server.pem'),
        tlsKey: tlsFile('server-key.pem'),
      }),
      auth: { mode: 'single-token', token: TOKEN },
      workerCa: ca,
      clientCredentials: credentials.createSsl(ca),
      clientHost: 'localhost',
    });
    // A worker serving TLS and checking the token, as real workers do.
    worker = await ScriptedWorker.start({
      workerId: 'w1',
      tls: { cert, key },
      requireToken: TOKEN,
    });
    await worker
      .connect(test.address, { credentials: credentials.createSsl(ca), token: TOKEN })
      .reportStatus();
  });

  after(async () => {
    worker.stop();
    await test.close();
    const events = readLog(test.logDir);
    expect(fold(events).reservations.size, 'no reservation in the log').to.equal(0);
    expect(storyOf(events, 'r-plaintext'), 'the plaintext call in the log').to.deep.equal([]);
    cleanTempDirs();
  });

  it('serves calls over TLS with the token, and sends the token to the worker over TLS', async () => {
    const outcome = await run(test.client, 'echo secure', {}, { metadata: bearer(TOKEN) });
    expect(codeOf(outcome)).to.equal('OK');
    expect(outcome.payload).to.equal('echo secure');
    expect(worker.calls.at(-1)?.metadata.get('authorization')).to.deep.equal([`Bearer ${TOKEN}`]);
  });

  it('refuses a call with no token or a wrong one: UNAUTHENTICATED', async () => {
    const missing = await run(test.client, 'echo');
    expect(codeOf(missing)).to.equal('UNAUTHENTICATED');
    expect(missing.error?.details).to.match(/missing bearer token/);
    const wrong = await run(test.client, 'echo', {}, { metadata: bearer('guess') });
    expect(codeOf(wrong)).to.equal('UNAUTHENTICATED');
    expect(wrong.error?.details).to.not.include(TOKEN);
    expect(test.router.state.reservations.size).to.equal(0);
  });

  it('refuses worker reports without the token', async () => {
    const stranger = await ScriptedWorker.start({ workerId: 'w-stranger' });
    try {
      const error = await stranger
        .connect(test.address, { credentials: credentials.createSsl(ca) })
        .reportStatus()
        .then(
          () => undefined,
          (e: { code: number }) => e,
        );
      expect(error?.code).to.equal(16);
      expect(test.router.state.workers.has('w-stranger')).to.equal(false);
    } finally {
      stranger.stop();
    }
  });

  it('refuses plaintext clients, even with the token, before anything is recorded', async () => {
    const lastSeq = test.router.state.lastSeq;
    const plain = new ProxyServiceClient(test.address, credentials.createInsecure());
    const outcome = await run(
      plain,
      'echo plaintext',
      { requestId: 'r-plaintext' },
      { metadata: bearer(TOKEN), deadline: Date.now() + 5_000 },
    );
    plain.close();
    expect(codeOf(outcome)).to.equal('UNAVAILABLE');
    // No event at all, so no CallRequested: the call never reached the router's handlers.
    expect(test.router.state.lastSeq).to.equal(lastSeq);
  });

  it('keeps its own health service open without a token', async () => {
    const status = await healthStatus(test.address, '', 5_000, credentials.createSsl(ca));
    expect(status).to.equal('SERVING');
  });

  it('a worker refusing the router credentials is the router operator problem, not the client', async () => {
    const picky = await ScriptedWorker.start({
      workerId: 'a-picky',
      tls: { cert, key },
      requireToken: 'another token',
    });
    try {
      await picky
        .connect(test.address, { credentials: credentials.createSsl(ca), token: TOKEN })
        .reportStatus();
      const outcome = await run(test.client, 'echo', {}, { metadata: bearer(TOKEN) });
      expect(codeOf(outcome)).to.equal('INTERNAL');
      expect(outcome.error?.details).to.match(/refused the router's credentials/);
    } finally {
      await picky.reportStatus({ status: 3 });
      picky.stop();
    }
  });

  it('refuses to start with neither TLS material nor --insecure', () => {
    expect(() => servingSecurityOf({})).to.throw(/--tls-cert FILE and --tls-key FILE.*--insecure/);
    expect(() => servingSecurityOf({ insecure: true, tlsCert: 'x' })).to.throw(/contradicts/);
  });
});
