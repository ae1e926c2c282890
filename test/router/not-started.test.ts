import { expect } from 'chai';
import type { ServiceError } from '@grpc/grpc-js';
import { codeOf, run, startTestRouter, type TestRouter } from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';
import { freePort } from '../support/e2e-cluster.js';

/** The call's IDs, which every answer of the router ends with (the router's own, not relayed). */
const ID_TRAILERS = new Set([
  'readie-request-id',
  'readie-session-id',
  'readie-worker-id',
  'readie-container-id',
  'readie-checkpoint-id',
  'readie-version',
  'readie-routing-revision',
]);

/** The readie trailers a failed call brought back to the client about its function. */
function trailersOf(error: ServiceError | undefined): Record<string, string> {
  const trailers: Record<string, string> = {};
  for (const [name, value] of Object.entries(error?.metadata.getMap() ?? {})) {
    if (name.startsWith('readie-') && !ID_TRAILERS.has(name)) trailers[name] = String(value);
  }
  return trailers;
}

describe('router: what a failed call says about its function (trailers)', function () {
  this.timeout(60_000);
  let test: TestRouter;
  afterEach(async () => {
    await test?.close();
    cleanTempDirs();
  });

  it('a refusal before placement says readie-not-started', async () => {
    test = await startTestRouter();
    const outcome = await run(test.client, 'echo');
    expect(codeOf(outcome)).to.equal('UNAVAILABLE');
    expect(trailersOf(outcome.error)).to.deep.equal({ 'readie-not-started': '1' });
    expect(outcome.error?.metadata.get('readie-request-id')).to.have.length(1);
  });

  it('a worker the router cannot reach: not started; a worker that ran and failed: no marker', async () => {
    test = await startTestRouter();
    const worker = await ScriptedWorker.start({ workerId: 'w-reach' });
    try {
      await worker.connect(test.address).reportStatus({ address: `127.0.0.1:${await freePort()}` });
      const unreachable = await run(test.client, 'echo');
      expect(codeOf(unreachable)).to.equal('UNAVAILABLE');
      expect(unreachable.error?.details).to.match(
        /^no workers available: the router could not reach w-reach for this call \(could not connect to 127\.0\.0\.1:\d+: No connection established/,
      );
      expect(trailersOf(unreachable.error)).to.deep.equal({ 'readie-not-started': '1' });

      await worker.reportStatus();
      const ran = await run(test.client, 'fail UNAVAILABLE the executor was killed by SIGSEGV');
      expect(codeOf(ran)).to.equal('UNAVAILABLE');
      expect(trailersOf(ran.error)).to.deep.equal({});
      const refused = await run(test.client, 'refuse FAILED_PRECONDITION');
      expect(trailersOf(refused.error)).to.deep.equal({ 'readie-not-started': '1' });
    } finally {
      worker.stop();
    }
  });

  it("relays an out-of-memory kill: RESOURCE_EXHAUSTED with the worker's trailers, never its IDs", async () => {
    test = await startTestRouter();
    const worker = await ScriptedWorker.start({ workerId: 'w-oom' });
    try {
      await worker.connect(test.address).reportStatus();
      const outcome = await run(test.client, 'oom 536870912');
      expect(codeOf(outcome)).to.equal('RESOURCE_EXHAUSTED');
      expect(outcome.error?.details).to.match(/^worker w-oom: the call ran out of memory/);
      expect(trailersOf(outcome.error)).to.deep.equal({
        'readie-killed': 'out-of-memory',
        'readie-memory-budget': '536870912',
      });
      // The IDs are the router's: the call's worker, whatever the worker's trailers said.
      expect(outcome.error?.metadata.get('readie-worker-id')).to.deep.equal(['w-oom']);
    } finally {
      worker.stop();
    }
  });

  it('a credential refused by the router says readie-not-started', async () => {
    test = await startTestRouter({ auth: { mode: 'single-token', token: 'the-only-token-0123' } });
    const outcome = await run(test.client, 'echo');
    expect(codeOf(outcome)).to.equal('UNAUTHENTICATED');
    expect(trailersOf(outcome.error)).to.deep.equal({ 'readie-not-started': '1' });
  });
});
