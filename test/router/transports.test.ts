import { expect } from 'chai';
import type { ServiceError } from '@grpc/grpc-js';
import { grpcJsRelay } from '../../bench/grpc-js-relay/index.js';
import {
  bearer,
  callConfig,
  chunk,
  codeOf,
  configMessage,
  exchange,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

const TOKEN = 'transports-shared-token-0123';
const MiB = 1024 * 1024;

function trailersOf(error: ServiceError | undefined): Record<string, string> {
  const trailers: Record<string, string> = {};
  for (const [name, value] of Object.entries(error?.metadata.getMap() ?? {})) {
    if (name.startsWith('readie-')) trailers[name] = String(value);
  }
  return trailers;
}

// The same calls through both shells of the call machine: what a client sees must not depend on
// which transport relays it.
// The product's HTTP/2 relay, and the first one (grpc-js), kept in bench/ as a baseline.
const RELAYS = { http2: undefined, 'grpc-js': grpcJsRelay } as const;

for (const relay of ['http2', 'grpc-js'] as const) {
  describe(`router: the ${relay} relay`, function () {
    this.timeout(60_000);
    let test: TestRouter;
    let worker: ScriptedWorker;
    const metadata = () => bearer(TOKEN);

    before(async () => {
      test = await startTestRouter({
        relay: RELAYS[relay],
        auth: { mode: 'single-token', token: TOKEN },
      });
      worker = await ScriptedWorker.start({ workerId: `w-${relay}` });
      await worker.connect(test.address, { token: TOKEN }).reportStatus();
    });

    after(async () => {
      worker.stop();
      await test.close();
      cleanTempDirs();
    });

    it('relays a call, a payload of several chunks up and down, and its IDs', async () => {
      const echo = await run(
        test.client,
        'echo hello',
        { sessionId: `s-${relay}` },
        { metadata: metadata() },
      );
      expect(codeOf(echo)).to.equal('OK');
      expect(echo.payload).to.equal('echo hello');
      expect(echo.ids.at(-1)).to.include({ workerId: `w-${relay}`, sessionId: `s-${relay}` });
      const up = await exchange(
        test.client,
        [
          configMessage(callConfig()),
          chunk('count'),
          chunk(Buffer.alloc(MiB)),
          chunk(Buffer.alloc(MiB)),
        ],
        { metadata: metadata() },
      );
      expect(up.payload).to.equal(String(2 * MiB + 5));
      const down = await run(test.client, `stream 8 ${MiB}`, {}, { metadata: metadata() });
      expect(Buffer.concat(down.chunks).length).to.equal(8 * MiB);
    });

    it("passes the worker's codes, messages and trailers on, and marks refusals not started", async () => {
      const failed = await run(
        test.client,
        'fail ABORTED scripted abort',
        {},
        { metadata: metadata() },
      );
      expect(codeOf(failed)).to.equal('ABORTED');
      expect(failed.error?.details).to.equal(`worker w-${relay}: scripted abort`);
      const oom = await run(test.client, 'oom 1024', {}, { metadata: metadata() });
      expect(trailersOf(oom.error)).to.include({
        'readie-killed': 'out-of-memory',
        'readie-memory-budget': '1024',
        'readie-worker-id': `w-${relay}`,
      });
      const unauthenticated = await run(
        test.client,
        'echo',
        {},
        { metadata: bearer('wrong-token-0123456') },
      );
      expect(codeOf(unauthenticated)).to.equal('UNAUTHENTICATED');
      expect(trailersOf(unauthenticated.error)).to.deep.equal({ 'readie-not-started': '1' });
      const malformed = await exchange(test.client, [chunk('echo')], { metadata: metadata() });
      expect(codeOf(malformed)).to.equal('INVALID_ARGUMENT');
      expect(trailersOf(malformed.error)).to.deep.equal({ 'readie-not-started': '1' });
    });

    it("ends a call at the client's deadline", async () => {
      const outcome = await run(
        test.client,
        'hang',
        {},
        { metadata: metadata(), deadline: Date.now() + 300 },
      );
      expect(codeOf(outcome)).to.equal('DEADLINE_EXCEEDED');
    });
  });
}
