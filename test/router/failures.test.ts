import { expect } from 'chai';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import {
  callConfig,
  chunk,
  codeOf,
  collect,
  configMessage,
  eventually,
  foldLog,
  readLog,
  run,
  startTestRouter,
  storyOf,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: the failure table, end to end', function () {
  this.timeout(60_000);

  describe('without workers', () => {
    let test: TestRouter;
    before(async () => (test = await startTestRouter()));
    after(async () => {
      await test.close();
      cleanTempDirs();
    });

    it('no worker: UNAVAILABLE, recorded as a rejection', async () => {
      const outcome = await run(test.client, 'echo', { requestId: 'r-none' });
      expect(codeOf(outcome)).to.equal('UNAVAILABLE');
      expect(outcome.error?.details).to.equal('no workers available');
      expect(test.router.state.reservations.size).to.equal(0);
    });
  });

  describe('with scripted workers', () => {
    let test: TestRouter;
    let worker: ScriptedWorker;

    before(async () => {
      test = await startTestRouter({ config: { EXECUTION_TIMEOUT: 1_500 } });
      worker = await ScriptedWorker.start({ workerId: 'w1' });
      await worker.connect(test.address).reportStatus({ memoryTotal: 4 * 1024 ** 3 });
    });

    afterEach(async () => {
      await eventually(() => test.router.state.reservations.size === 0, 'no reservation left');
    });

    after(async () => {
      worker.stop();
      await test.close();
      const events = readLog(test.logDir);
      expect(foldLog(test.logDir).reservations.size, 'no reservation in the log').to.equal(0);
      const placed = events.filter((event) => event.type === 'CallPlaced').length;
      const redialed = events.filter((event) => event.type === 'CallDialFailed').length;
      const finished = events.filter((event) => event.type === 'CallFinished').length;
      expect(redialed, 'one attempt could not reach its worker').to.equal(1);
      expect(finished, 'every placed attempt released exactly once').to.equal(placed - redialed);
      expect(storyOf(events, 'r-redial')).to.deep.equal([
        'CallRequested',
        'CallPlaced',
        'CallDialFailed',
        'CallPlaced',
        'CallBound',
        'CallFinished',
      ]);
      const endedWith = (requestId: string) =>
        events.find((event) => event.type === 'CallFinished' && event.requestId === requestId);
      expect(endedWith('r-hang')).to.include({ ok: false, code: 'DEADLINE_EXCEEDED' });
      expect(endedWith('r-client-deadline')).to.include({ ok: false, code: 'DEADLINE_EXCEEDED' });
      expect(endedWith('r-leaves')).to.include({ ok: false, code: 'CANCELLED' });
      cleanTempDirs();
    });

    it('never fits: RESOURCE_EXHAUSTED naming the largest offer, final', async () => {
      const outcome = await run(test.client, 'echo', { memory: 8 * 1024 ** 3 });
      expect(codeOf(outcome)).to.equal('RESOURCE_EXHAUSTED');
      expect(outcome.error?.details).to.match(
        /no worker can ever accept this request: the largest worker offers \S+ of memory; this call asks 8GiB/,
      );
      expect(outcome.error?.metadata.get('readie-never-fits')).to.deep.equal(['1']);
    });

    it('a bad package or checkpoint: INVALID_ARGUMENT', async () => {
      expect(codeOf(await run(test.client, 'echo', { packages: ['-r reqs.txt'] }))).to.equal(
        'INVALID_ARGUMENT',
      );
      expect(codeOf(await run(test.client, 'echo', { checkpointId: 'nope' }))).to.equal(
        'INVALID_ARGUMENT',
      );
    });

    for (const code of [
      'DEADLINE_EXCEEDED',
      'UNAVAILABLE',
      'RESOURCE_EXHAUSTED',
      'FAILED_PRECONDITION',
    ]) {
      it(`the worker's own ${code} passes through, and the call finishes with it`, async () => {
        const requestId = `r-${code}`;
        const outcome = await run(test.client, `fail ${code} scripted ${code}`, { requestId });
        expect(codeOf(outcome)).to.equal(code);
        expect(outcome.error?.details).to.equal(`worker w1: scripted ${code}`);
        await test.router.close(500);
        const events = readLog(test.logDir);
        expect(storyOf(events, requestId)).to.deep.equal([
          'CallRequested',
          'CallPlaced',
          'CallFinished',
        ]);
        expect(events.findLast((event) => event.type === 'CallFinished')).to.include({
          ok: false,
          code,
        });
        test = await startTestRouter({ logDir: test.logDir, config: { EXECUTION_TIMEOUT: 1_500 } });
        await worker.connect(test.address).reportUtilization();
      });
    }

    it('the deadline (EXECUTION_TIMEOUT): DEADLINE_EXCEEDED, and the worker call is cancelled', async () => {
      const outcome = await run(test.client, 'hang', { requestId: 'r-hang' });
      expect(codeOf(outcome)).to.equal('DEADLINE_EXCEEDED');
      const call = worker.calls.find((c) => c.header.ids?.requestId === 'r-hang');
      await eventually(() => call?.cancelled === true, 'the worker call cancelled');
    });

    it("the client's own deadline ends the call the same way", async () => {
      const outcome = await run(
        test.client,
        'hang',
        { requestId: 'r-client-deadline' },
        {
          deadline: Date.now() + 400,
        },
      );
      expect(codeOf(outcome)).to.equal('DEADLINE_EXCEEDED');
      const call = worker.calls.find((c) => c.header.ids?.requestId === 'r-client-deadline');
      await eventually(() => call?.cancelled === true, 'the worker call cancelled');
    });

    it('a client that disconnects cancels the worker call; the call finishes CANCELLED', async () => {
      const stream = test.client.requestExecution();
      const outcome = collect(stream);
      stream.write(configMessage(callConfig({ requestId: 'r-leaves' })));
      stream.write(chunk('hang'));
      await eventually(
        () => worker.calls.some((c) => c.header.ids?.requestId === 'r-leaves' && c.bytes > 0),
        'the worker to get the call',
      );
      stream.cancel();
      expect(codeOf(await outcome)).to.equal('CANCELLED');
      const call = worker.calls.find((c) => c.header.ids?.requestId === 'r-leaves');
      await eventually(() => call?.cancelled === true, 'the worker call cancelled');
      await eventually(() => test.router.state.reservations.size === 0, 'release');
    });

    it('a worker whose stream cannot be opened: the call is placed again on another one', async () => {
      const gone = await ScriptedWorker.start({ workerId: 'a-gone' });
      await gone.connect(test.address).reportStatus();
      gone.stop();
      const outcome = await run(test.client, 'echo', { requestId: 'r-redial' }); // a-gone sorts first
      expect(codeOf(outcome)).to.equal('OK');
      expect(outcome.ids.at(-1)?.workerId).to.equal('w1');
      const story = test.router.state;
      expect(story.workers.get('a-gone')?.probeFailures, 'counted as a failed probe').to.equal(1);
      await worker.connect(test.address).reportStatus({ workerId: 'a-gone', status: 3 });
    });

    it('a failed call that created its session pin unpins it', async () => {
      const outcome = await run(test.client, 'partial INTERNAL', {
        sessionId: 's-fails',
        requestId: 'r-pin-fails',
      });
      expect(codeOf(outcome)).to.equal('INTERNAL');
      expect(outcome.payload).to.equal('partial');
      expect(test.router.state.sessions.get('s-fails')?.pin).to.equal(null);
      await test.router.close(500);
      expect(storyOf(readLog(test.logDir), 'r-pin-fails')).to.deep.equal([
        'CallRequested',
        'CallPlaced',
        'CallBound',
        'SessionPinned',
        'CallFinished',
      ]);
      const unpinned = readLog(test.logDir).findLast((event) => event.type === 'SessionUnpinned');
      expect(unpinned).to.include({ sessionId: 's-fails', reason: 'call_failed' });
      test = await startTestRouter({ logDir: test.logDir, config: { EXECUTION_TIMEOUT: 1_500 } });
      await worker.connect(test.address).reportUtilization();
    });

    it('an expired session: NOT_FOUND "session expired"', async () => {
      const first = await run(test.client, 'echo', { sessionId: 's-expires' });
      expect(codeOf(first)).to.equal('OK');
      const containerId = first.ids.at(-1)?.containerId as string;
      await worker.reportContainer(containerId, ContainerState.CONTAINER_STATE_REMOVED);
      const later = await run(test.client, 'echo', { sessionId: 's-expires' });
      expect(codeOf(later)).to.equal('NOT_FOUND');
      expect(later.error?.details).to.match(/^session expired: .*container_removed/);
    });

    it('a router shutting down ends calls still running after the grace period: UNAVAILABLE', async () => {
      const running = run(test.client, 'hang', { requestId: 'r-shutdown' });
      await eventually(
        () => worker.calls.some((c) => c.header.ids?.requestId === 'r-shutdown'),
        'the call to run',
      );
      await test.router.close(200);
      const outcome = await running;
      expect(codeOf(outcome)).to.equal('UNAVAILABLE');
      expect(outcome.error?.details).to.match(/shutting down/);
      const finished = readLog(test.logDir).filter(
        (event) => event.type === 'CallFinished' && event.requestId === 'r-shutdown',
      );
      expect(finished).to.have.length(1);
      expect(finished[0]).to.include({ ok: false, code: 'UNAVAILABLE' });
      test = await startTestRouter({ logDir: test.logDir, config: { EXECUTION_TIMEOUT: 1_500 } });
      await worker.connect(test.address).reportUtilization();
    });

    it('disable_optimized_execution in a session restored from a checkpoint: FAILED_PRECONDITION', async () => {
      const pinned = await ScriptedWorker.start({
        workerId: 'b-ckpt',
        checkpointUsed: () => 'checkpoint_0',
      });
      await pinned.connect(test.address).reportStatus();
      try {
        // Only b-ckpt answers with a checkpoint; place there by leaving w1 out of room.
        await worker.reportUtilization({ memoryUsed: 4 * 1024 ** 3 });
        const first = await run(test.client, 'echo', { sessionId: 's-ckpt' });
        expect(first.ids.at(-1)?.workerId).to.equal('b-ckpt');
        const second = await run(test.client, 'echo', {
          sessionId: 's-ckpt',
          disableOptimizedExecution: true,
        });
        expect(codeOf(second)).to.equal('FAILED_PRECONDITION');
      } finally {
        await worker.reportUtilization({ memoryUsed: 0 });
        await worker.connect(test.address).reportStatus({ workerId: 'b-ckpt', status: 3 });
        pinned.stop();
      }
    });
  });
});
