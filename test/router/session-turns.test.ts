import { expect } from 'chai';
import {
  codeOf,
  eventually,
  foldLog,
  readLog,
  settledLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: session turn-taking under concurrency', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  async function cluster(config = {}): Promise<{ test: TestRouter; worker: ScriptedWorker }> {
    const test = await startTestRouter({ config });
    const worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address).reportStatus();
    return { test, worker };
  }

  it('runs one call per session at a time, the others in arrival order', async () => {
    const { test, worker } = await cluster();
    try {
      const requestIds = ['t0', 't1', 't2', 't3', 't4', 't5'];
      const outcomes = [];
      for (const [i, requestId] of requestIds.entries()) {
        // The first call runs long enough for the others to line up behind it.
        const command = i === 0 ? 'sleep 2000' : 'sleep 30';
        outcomes.push(run(test.client, command, { sessionId: 's-busy', requestId }));
        // Let each call reach the router (running, or waiting in line) before the next.
        await eventually(
          () =>
            i === 0
              ? worker.calls.some((c) => c.header.ids?.requestId === requestId)
              : test.router.waitingCalls === i,
          `call ${requestId} to arrive`,
        );
      }
      // A call of another session runs meanwhile.
      const other = await run(test.client, 'echo', { sessionId: 's-other' });
      expect(codeOf(other)).to.equal('OK');
      const results = await Promise.all(outcomes);
      expect(results.map(codeOf)).to.deep.equal(requestIds.map(() => 'OK'));
      expect(worker.maxConcurrentPerSession, 'never two calls of one session at once').to.equal(1);
      const ran = worker.calls
        .map((c) => c.header.ids?.requestId ?? '')
        .filter((id) => id.startsWith('t'));
      expect(ran).to.deep.equal(requestIds);
      const containers = new Set(
        worker.calls.filter((c) => c.header.ids?.sessionId === 's-busy').map((c) => c.containerId),
      );
      expect(containers.size, 'one container for the session').to.equal(1);
      // Each wait is logged on the call's request: the first did not wait, the next ones did.
      const waits = new Map(
        (await settledLog(test)).flatMap((e) =>
          e.type === 'CallRequested' ? [[e.requestId, e.turnWaitMs] as const] : [],
        ),
      );
      expect(waits.get('t0')).to.equal(null);
      expect(waits.get('t1')).to.be.greaterThan(1000);
      for (const requestId of requestIds.slice(1)) {
        expect(waits.get(requestId), requestId).to.be.greaterThan(0);
      }
    } finally {
      worker.stop();
      await test.close();
    }
    expect(foldLog(test.logDir).reservations.size).to.equal(0);
  });

  it("logs a session's pin once: its later calls in the same container append no SessionPinned (rules 11)", async () => {
    const { test, worker } = await cluster();
    try {
      for (const requestId of ['p0', 'p1', 'p2', 'p3']) {
        expect(codeOf(await run(test.client, 'echo', { sessionId: 's-pin', requestId }))).to.equal(
          'OK',
        );
      }
      const log = await settledLog(test);
      expect(log.find((e) => e.type === 'RouterStarted')).to.deep.include({
        rulesVersion: PLACEMENT_RULES_VERSION,
      });
      const first = log.find((e) => e.type === 'CallBound' && e.requestId === 'p0');
      const container = first?.type === 'CallBound' ? first.containerId : 'none';
      // The first call made the container; the later ones were placed in it.
      const placedIn = log.flatMap((e) => (e.type === 'CallPlaced' ? [e.containerId] : []));
      expect(placedIn).to.deep.equal([null, container, container, container]);
      const pins = log.filter((e) => e.type === 'SessionPinned');
      expect(pins.map((e) => e.type === 'SessionPinned' && e.requestId)).to.deep.equal(['p0']);
      expect(foldLog(test.logDir).sessions.get('s-pin')?.pin?.containerId).to.equal(container);
    } finally {
      worker.stop();
      await test.close();
    }
  });

  it('gives up after SESSION_WAIT_TIMEOUT with RESOURCE_EXHAUSTED "session is busy"', async () => {
    const { test, worker } = await cluster({ SESSION_WAIT_TIMEOUT: 300 });
    try {
      const running = run(test.client, 'sleep 2500', { sessionId: 's-slow', requestId: 'slow' });
      await eventually(
        () => worker.calls.some((c) => c.header.ids?.requestId === 'slow'),
        'the first call to run',
      );
      const waiting = await run(test.client, 'echo', { sessionId: 's-slow', requestId: 'late' });
      expect(codeOf(waiting)).to.equal('RESOURCE_EXHAUSTED');
      expect(waiting.error?.details).to.match(/^session is busy/);
      expect(worker.calls.some((c) => c.header.ids?.requestId === 'late')).to.equal(false);
      expect(codeOf(await running)).to.equal('OK');
      // The turn passes on once the call ends.
      expect(codeOf(await run(test.client, 'echo', { sessionId: 's-slow' }))).to.equal('OK');
      // The refusal is logged: the call's end, though it never reached placement.
      const refusal = readLog(test.logDir).filter((e) => e.type === 'SessionTurnRefused');
      expect(refusal).to.have.length(1);
      expect(refusal[0]).to.deep.include({
        requestId: 'late',
        sessionId: 's-slow',
        ahead: 0,
        cause: 'call:late',
      });
      expect(refusal[0]?.type === 'SessionTurnRefused' && refusal[0].waitedMs).to.be.at.least(300);
    } finally {
      worker.stop();
      await test.close();
    }
    expect(foldLog(test.logDir).reservations.size).to.equal(0);
  });

  it('a waiting caller that leaves gives up its place in line', async () => {
    const { test, worker } = await cluster();
    try {
      const running = run(test.client, 'sleep 600', { sessionId: 's-leave', requestId: 'first' });
      await eventually(
        () => worker.calls.some((c) => c.header.ids?.requestId === 'first'),
        'the first call to run',
      );
      const impatient = await run(
        test.client,
        'echo',
        { sessionId: 's-leave', requestId: 'impatient' },
        { deadline: Date.now() + 150 },
      );
      expect(codeOf(impatient)).to.equal('DEADLINE_EXCEEDED');
      const next = run(test.client, 'echo', { sessionId: 's-leave', requestId: 'next' });
      expect(codeOf(await running)).to.equal('OK');
      expect(codeOf(await next)).to.equal('OK');
      expect(worker.calls.some((c) => c.header.ids?.requestId === 'impatient')).to.equal(false);
    } finally {
      worker.stop();
      await test.close();
    }
  });
});
