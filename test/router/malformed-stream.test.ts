import { expect } from 'chai';
import { PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import {
  callConfig,
  chunk,
  codeOf,
  collect,
  configMessage,
  eventually,
  exchange,
  foldLog,
  readLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

const MiB = 1024 * 1024;

describe('router: malformed client streams', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter();
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address).reportStatus();
  });

  afterEach(async () => {
    await eventually(() => test.router.state.reservations.size === 0, 'no reservation left');
    // The router still serves after every case.
    expect(codeOf(await run(test.client, 'echo still here'))).to.equal('OK');
  });

  after(async () => {
    worker.stop();
    await test.close();
    expect(foldLog(test.logDir).reservations.size).to.equal(0);
    cleanTempDirs();
  });

  it('refuses a payload before the config', async () => {
    const outcome = await exchange(test.client, [chunk('echo')]);
    expect(codeOf(outcome)).to.equal('INVALID_ARGUMENT');
    expect(outcome.error?.details).to.match(/payload before config/);
  });

  it('refuses a config without a request ID', async () => {
    const outcome = await exchange(test.client, [
      configMessage(callConfig({ requestId: '' })),
      chunk('echo'),
    ]);
    expect(codeOf(outcome)).to.equal('INVALID_ARGUMENT');
    expect(outcome.error?.details).to.match(/request_id/);
  });

  it('refuses an empty first message and a stream with no message at all', async () => {
    expect(codeOf(await exchange(test.client, [{ message: undefined }]))).to.equal(
      'INVALID_ARGUMENT',
    );
    const outcome = await exchange(test.client, []);
    expect(codeOf(outcome)).to.equal('INVALID_ARGUMENT');
    expect(outcome.error?.details).to.match(/ended before any config/);
  });

  it('refuses a config without a payload format', async () => {
    const outcome = await exchange(test.client, [
      configMessage(callConfig({ format: PayloadFormat.PAYLOAD_FORMAT_UNSPECIFIED })),
    ]);
    expect(codeOf(outcome)).to.equal('INVALID_ARGUMENT');
  });

  it('refuses a second config mid-stream, cancelling the worker call and finishing the call', async () => {
    const config = callConfig({ requestId: 'r-second-config' });
    const outcome = await exchange(test.client, [
      configMessage(config),
      chunk('echo'),
      configMessage(config),
    ]);
    expect(codeOf(outcome)).to.equal('INVALID_ARGUMENT');
    expect(outcome.error?.details).to.match(/second config/);
    const call = worker.calls.find((c) => c.header.ids?.requestId === 'r-second-config');
    await eventually(() => call?.cancelled === true, 'the worker call cancelled');
  });

  it('refuses a chunk over 1 MiB and accepts one of exactly 1 MiB', async () => {
    const exact = await exchange(test.client, [
      configMessage(callConfig()),
      chunk('count'),
      chunk(Buffer.alloc(MiB)),
    ]);
    expect(codeOf(exact)).to.equal('OK');
    expect(exact.payload).to.equal(String(MiB + 5));
    const big = await exchange(test.client, [
      configMessage(callConfig({ requestId: 'r-big' })),
      chunk('count'),
      chunk(Buffer.alloc(MiB + 1)),
    ]);
    expect(codeOf(big)).to.equal('INVALID_ARGUMENT');
    expect(big.error?.details).to.match(/at most 1048576 bytes/);
  });

  it('refuses a request ID already in flight with ALREADY_EXISTS', async () => {
    const stream = test.client.requestExecution();
    const first = collect(stream);
    stream.write(configMessage(callConfig({ requestId: 'r-twice' })));
    stream.write(chunk('hang'));
    await eventually(
      () => worker.calls.some((c) => c.header.ids?.requestId === 'r-twice'),
      'the first call to run',
    );
    const second = await run(test.client, 'echo', { requestId: 'r-twice' });
    expect(codeOf(second)).to.equal('ALREADY_EXISTS');
    stream.cancel();
    expect(codeOf(await first)).to.equal('CANCELLED');
  });

  it('records each malformed call that was placed as finished with INVALID_ARGUMENT', async () => {
    await test.router.close(500);
    const events = readLog(test.logDir);
    for (const requestId of ['r-second-config', 'r-big']) {
      const finished = events.filter(
        (event) => event.type === 'CallFinished' && event.requestId === requestId,
      );
      expect(finished, requestId).to.have.length(1);
      expect(finished[0]).to.include({ ok: false, code: 'INVALID_ARGUMENT' });
    }
    test = await startTestRouter({ logDir: test.logDir });
    await worker.connect(test.address).reportUtilization();
  });
});
