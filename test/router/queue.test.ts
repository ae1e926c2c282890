/**
 * The admission queue through a real router (docs/placement.md, "The admission queue"): a
 * scripted worker with one slot, `QUEUE_TIMEOUT` 1.5 s. A call that finds the slot taken waits,
 * unread, and runs as soon as the slot frees; one that waits too long, or whose client's deadline
 * passes, leaves the queue with its reason logged; replay reproduces every decision of the log,
 * admissions included.
 */
import { expect } from 'chai';
import type { ClusterEvent } from '../../src/events/index.js';
import { replayEvents } from '../support/replay.js';
import {
  callConfig,
  codeOf,
  eventually,
  readLog,
  settledLog,
  run,
  startTestRouter,
  storyOf,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: the admission queue', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter({ config: { QUEUE_TIMEOUT: 1_500 } });
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address).reportStatus({ maxContainers: 1 });
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  /** Starts a call holding the only slot for `ms`; resolves once it is placed, with its end. */
  async function holdSlot(ms: number): Promise<{ readonly done: Promise<unknown> }> {
    const config = callConfig();
    const done = run(test.client, `sleep ${ms}`, config);
    await eventually(
      () => test.router.state.reservations.has(config.requestId),
      'the first call to hold the slot',
    );
    // In an object: an async function's returned promise would be awaited.
    return { done };
  }

  /** Waits until `requestId` is queued, and checks the worker has not heard of it. */
  async function queued(requestId: string): Promise<void> {
    await eventually(() => test.router.state.queue.has(requestId), `${requestId} to be queued`);
    expect(worker.calls.some((call) => call.header.ids?.requestId === requestId)).to.equal(false);
  }

  /** The `CallLeftQueue` of `requestId`, once the log on disk holds it. */
  async function leftQueue(requestId: string): Promise<ClusterEvent | undefined> {
    let left: ClusterEvent | undefined;
    await eventually(() => {
      left = readLog(test.logDir).find(
        (e) => e.type === 'CallLeftQueue' && e.requestId === requestId,
      );
      return left !== undefined;
    }, `${requestId} to leave the queue on disk`);
    return left;
  }

  it('a call that finds no room waits, and runs as soon as the slot frees', async () => {
    const first = await holdSlot(600);
    const config = callConfig();
    const second = run(test.client, 'echo waited', config);
    await queued(config.requestId);
    const outcome = await second;
    expect(codeOf(outcome)).to.equal('OK');
    // The chunk it sent before the router paused it reached the worker once it was admitted.
    expect(outcome.payload).to.equal('echo waited');
    await first.done;
    // The log on disk catches up with the state a moment later.
    let story: string[] = [];
    await eventually(() => {
      story = storyOf(readLog(test.logDir), config.requestId);
      return story.includes('CallFinished');
    }, 'the call to be finished on disk');
    expect(story.slice(0, 4)).to.deep.equal([
      'CallRequested',
      'CallQueued',
      'CallAdmitted',
      'CallPlaced',
    ]);
    expect(story.at(-1)).to.equal('CallFinished');
  });

  it('a call that waits QUEUE_TIMEOUT leaves the queue RESOURCE_EXHAUSTED, saying how long and why', async () => {
    const first = await holdSlot(3_000);
    const config = callConfig();
    const second = run(test.client, 'echo never', config);
    await queued(config.requestId);
    const outcome = await second;
    expect(codeOf(outcome)).to.equal('RESOURCE_EXHAUSTED');
    expect(outcome.error?.details).to.equal(
      'queued for 1500ms: no worker can accept this request (1 candidate: container-count ruled out 1) (QUEUE_TIMEOUT)',
    );
    expect(outcome.error?.metadata.get('readie-not-started')).to.deep.equal(['1']);
    // Final for the clients: the router waited for room already.
    expect(outcome.error?.metadata.get('readie-queued')).to.deep.equal(['1']);
    const left = await leftQueue(config.requestId);
    expect(left).to.deep.include({ reason: 'timeout', code: 'RESOURCE_EXHAUSTED' });
    await first.done;
  });

  it("a call whose client's deadline passes while it waits leaves the queue (deadline)", async () => {
    const first = await holdSlot(1_500);
    const config = callConfig();
    const outcome = await run(test.client, 'echo late', config, { deadline: Date.now() + 500 });
    expect(codeOf(outcome)).to.equal('DEADLINE_EXCEEDED');
    await eventually(
      () => !test.router.state.queue.has(config.requestId),
      'the call to leave the queue',
    );
    const left = await leftQueue(config.requestId);
    expect(left).to.deep.include({ reason: 'deadline', code: 'DEADLINE_EXCEEDED' });
    await first.done;
  });

  it('replay reproduces every decision of the log, the queue and its admissions included', async () => {
    const events = await settledLog(test);
    expect(events.some((e) => e.type === 'CallAdmitted')).to.equal(true);
    const results = replayEvents(events);
    const admissions = results.filter(
      (r) => events.find((e) => e.seq === r.seq)?.type === 'CallAdmitted',
    );
    expect(admissions).to.have.length.greaterThan(0);
    for (const result of results) {
      expect(result.recorded, `${result.requestId}: ${result.divergence ?? ''}`).to.equal('match');
    }
  });
});
