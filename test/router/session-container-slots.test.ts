/**
 * Router, real gRPC: a call the router places is never refused by the worker for its container
 * limit (docs/cluster-state.md, "Container slots"), though the worker's container reports reach
 * the router after the session call's end and after the session's. A scripted worker of one slot
 * counts its containers as a real worker does and holds its reports back while the test says; the
 * admission queue is on, so the router's own answer to a call with no room is to queue it.
 */
import { expect } from 'chai';
import { credentials } from '@grpc/grpc-js';
import { TenantServiceClient } from '../../src/proto/gen/readie/v1/tenant.js';
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
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import type { ScriptedSlots } from '../support/router/scripted-slots.js';
import { cleanTempDirs } from '../support/temp.js';

describe('router: a session container holds its slot until its worker reports it gone', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let slots: ScriptedSlots;
  let tenant: TenantServiceClient;

  before(async () => {
    test = await startTestRouter({ config: { QUEUE_TIMEOUT: 30_000 } });
    worker = await ScriptedWorker.start({ workerId: 'w1', containerSlots: 1 });
    slots = worker.slots!;
    await worker.connect(test.address).reportStatus({ maxContainers: 1 });
    tenant = new TenantServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    tenant.close();
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  const end = (sessionId: string) =>
    new Promise<void>((resolve, reject) =>
      tenant.endSession({ sessionId }, (error) => (error ? reject(error) : resolve())),
    );
  const has = (type: string, requestId: string) =>
    readLog(test.logDir).some(
      (event) => event.type === type && 'requestId' in event && event.requestId === requestId,
    );
  const record = (containerId: string) =>
    foldLog(test.logDir).workers.get('w1')?.containers.get(containerId)?.state;

  /**
   * A plain call arrives while the session's container holds the one slot: it queues, and is not
   * placed when `freeOnRouter` happens (what freed the slot on the router under rules 6), only once
   * the worker's held reports arrive; the worker then runs it.
   */
  async function queuedUntilReported(requestId: string, freeOnRouter: () => Promise<void>) {
    const waiting = run(test.client, 'echo', { requestId });
    await eventually(
      () => has('CallQueued', requestId) || has('CallPlaced', requestId),
      `${requestId} queued or placed`,
    );
    // What the router decided is all on disk before a check that something was not.
    await settledLog(test);
    expect(
      has('CallPlaced', requestId),
      'placed while the session container held the slot',
    ).to.equal(false);
    await freeOnRouter();
    await settledLog(test);
    expect(
      has('CallPlaced', requestId),
      'placed before the worker reported the slot free',
    ).to.equal(false);
    await slots.flush();
    const outcome = await waiting;
    expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
    expect(slots.refusals).to.deep.equal([]);
    expect(slots.held.size).to.equal(0);
  }

  it("(b) the session's call ends before the worker reported its container: the slot stays held through the session's end", async () => {
    slots.hold = true;
    const first = await run(test.client, 'echo', { requestId: 'b-first', sessionId: 'sb' });
    expect(codeOf(first)).to.equal('OK');
    const containerId = first.ids[0]!.containerId;
    expect(record(containerId), 'nothing reported yet').to.equal(undefined);
    await queuedUntilReported('b-after', () => end('sb'));
  });

  it('(a) the session ends while the container was last reported busy: the slot stays held until the worker reports it removed', async () => {
    const first = run(test.client, 'gate a', { requestId: 'a-first', sessionId: 'sa' });
    await eventually(() => slots.held.size === 1, 'the session container made');
    const [containerId] = [...slots.held.keys()] as [string];
    await eventually(() => record(containerId) === 'busy', `${containerId} reported busy`);
    slots.hold = true;
    worker.open('a');
    expect(codeOf(await first)).to.equal('OK');
    await queuedUntilReported('a-after', async () => {
      await end('sa');
      expect(record(containerId), 'the ready report is held back').to.equal('busy');
    });
  });
});
