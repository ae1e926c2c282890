import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import {
  AdminServiceClient,
  type StatusRequest,
  type StatusResponse,
} from '../../src/proto/gen/readie/v1/admin.js';
import { age, renderStatus } from '../../src/cli/status/status-sections.js';
import { RECENT_FAILURES_KEPT, WorkerFailures } from '../../src/router/admin/index.js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import {
  TenantServiceClient,
  type SlotsRequest,
  type SlotsResponse,
} from '../../src/proto/gen/readie/v1/tenant.js';
import {
  bearer,
  callConfig,
  chunk,
  codeOf,
  collect,
  configMessage,
  eventually,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const GiB = 1024 ** 3;
const TENANT = 'tenant-token-0123456789abcdef';
const W1 = 'worker-token-0123456789abcdef';
const OPERATOR = 'operator-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';

function status(
  client: AdminServiceClient,
  token: string | undefined,
  request: Partial<StatusRequest> = {},
): Promise<StatusResponse> {
  const metadata = token === undefined ? new Metadata() : bearer(token);
  return new Promise((resolve, reject) =>
    client.status({ includeExpiredSessions: false, ...request }, metadata, (error, answer) =>
      error ? reject(error) : resolve(answer),
    ),
  );
}

function slots(
  client: TenantServiceClient,
  token: string,
  request: Partial<SlotsRequest> = {},
): Promise<SlotsResponse> {
  return new Promise((resolve, reject) =>
    client.slots(
      { gpuMemory: 0, gpu: false, pinned: false, ...request },
      bearer(token),
      (error, answer) => (error ? reject(error) : resolve(answer)),
    ),
  );
}

function codeOfRefusal(promise: Promise<unknown>): Promise<number | 'OK'> {
  return promise.then(
    () => 'OK' as const,
    (error: ServiceError) => error.code,
  );
}

const PERMISSION_DENIED = 7;
const UNAUTHENTICATED = 16;

describe('router: the admin service and the tenant service', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let admin: AdminServiceClient;
  let tenant: TenantServiceClient;

  before(async () => {
    const dir = tempDir('readie-admin-');
    writeFileSync(
      join(dir, 'tokens'),
      `tenant acme ${TENANT}\nworker w1 ${W1}\noperator ops ${OPERATOR}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
    });
    worker = await ScriptedWorker.start({ workerId: 'w1', requireToken: ROUTER });
    await worker.connect(test.address, { token: W1 }).reportStatus();
    admin = new AdminServiceClient(test.address, credentials.createInsecure());
    tenant = new TenantServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    admin.close();
    tenant.close();
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('serves Status to the operator alone: tenants, workers and the router are refused', async () => {
    expect(await codeOfRefusal(status(admin, undefined))).to.equal(UNAUTHENTICATED);
    expect(await codeOfRefusal(status(admin, 'some-unknown-token-123456'))).to.equal(
      UNAUTHENTICATED,
    );
    for (const token of [TENANT, W1, ROUTER]) {
      const error = await status(admin, token).then(
        () => undefined,
        (e: ServiceError) => e,
      );
      expect(error?.code, token).to.equal(PERMISSION_DENIED);
      expect(error?.details).to.include('may not call readie.v1.AdminService');
    }
    expect(await codeOfRefusal(status(admin, OPERATOR))).to.equal('OK');
  });

  it("tells the operator the live cluster: workers with their load and containers, sessions, reservations, the log's seq", async () => {
    // A session pinned to a container, then a call held in flight.
    const pinned = await run(
      test.client,
      'echo',
      { requestId: 'r-pin', sessionId: 's-1' },
      { metadata: bearer(TENANT) },
    );
    expect(codeOf(pinned), pinned.error?.details).to.equal('OK');
    const sessionContainer = test.router.state.sessions.get('s-1')!.pin!.containerId;
    await worker.reportContainer(sessionContainer, ContainerState.CONTAINER_STATE_READY);
    await worker.reportUtilization({ memoryUsed: 2 * GiB, cpuUsed: 0.5, cpuTotal: 2 });
    const stream = test.client.requestExecution(bearer(TENANT));
    const held = collect(stream);
    stream.write(configMessage(callConfig({ requestId: 'r-held', memory: 3 * GiB })));
    stream.write(chunk('hold'));
    await eventually(() => test.router.state.reservations.has('r-held'), 'the held call placed');

    const answer = await status(admin, OPERATOR);
    const state = test.router.state;
    expect(answer.lastSeq).to.equal(state.lastSeq);
    expect(answer.routerVersion).to.equal('test');
    expect(answer.callsInFlight).to.equal(1);
    expect(answer.workers).to.have.length(1);
    const [w1] = answer.workers;
    expect(w1).to.deep.include({
      workerId: 'w1',
      status: 'ready',
      address: worker.address,
      flavor: 'cpu',
      memoryTotal: 16 * GiB,
      memoryUsed: 2 * GiB,
      memoryReserved: 3 * GiB,
      maxContainers: 8,
      cpuUsed: 0.5,
      cpuTotal: 2,
      inFlight: 1,
      probeFailures: 0,
      lastProbeProblem: '',
    });
    expect(w1!.lastReportAt).to.equal(state.workers.get('w1')!.lastHeardAt);
    expect(w1!.containers).to.deep.equal([
      {
        containerId: sessionContainer,
        state: 'ready',
        checkpointId: '',
        since: state.workers.get('w1')!.containers.get(sessionContainer)!.since,
        sessionId: 's-1',
      },
    ]);
    expect(answer.sessions).to.deep.equal([
      {
        sessionId: 's-1',
        state: 'pinned',
        workerId: 'w1',
        containerId: sessionContainer,
        checkpointId: '',
        expiredReason: '',
        expiredAt: '',
        since: state.workers.get('w1')!.containers.get(sessionContainer)!.since,
      },
    ]);
    expect(answer.reservations.map((r) => [r.requestId, r.workerId, r.memory])).to.deep.equal([
      ['r-held', 'w1', 3 * GiB],
    ]);

    // The tenant asks how many more containers it may start: placement's own filters decide.
    // 16 GiB x 0.9 headroom = 14.4 GiB; 2 GiB in use and 3 GiB reserved leave 9.4 GiB.
    const four = await slots(tenant, TENANT, { memory: 4 * GiB });
    expect(four).to.deep.equal({
      tenantId: 'acme',
      slots: 2,
      memory: 4 * GiB,
      workers: 1,
      // This router queues (QUEUE_TIMEOUT by default 10 min): a map of isolated inputs may send
      // the slots plus the calls its tenant may have waiting; no other tenant's call waits.
      queueTimeoutMs: 600_000,
      maxQueued: 2_000,
      othersWaiting: false,
    });
    // With the default 1 GiB budget, the container limit binds first: 8 minus the session's
    // container minus the call in flight.
    const small = await slots(tenant, TENANT);
    expect(small).to.include({ slots: 6, memory: 1024 ** 3 });
    stream.cancel();
    await held;
  });

  it('shows the calls that failed on each worker, newest first, and readie status prints them', async () => {
    // The held call of the test before was cancelled by its client: that is not a failure.
    expect((await status(admin, OPERATOR)).workers[0]).to.include({ failures: 0 });
    for (const [requestId, script] of [
      ['r-fail-1', 'fail INTERNAL the executor exited'],
      ['r-fail-2', 'fail UNAVAILABLE worker w1 is gone'],
    ] as const) {
      const failed = await run(test.client, script, { requestId }, { metadata: bearer(TENANT) });
      expect(codeOf(failed)).to.not.equal('OK');
    }
    const [w1] = (await status(admin, OPERATOR)).workers;
    expect(w1!.failures).to.equal(2);
    expect(w1!.recentFailures.map((f) => [f.requestId, f.code, f.message])).to.deep.equal([
      ['r-fail-2', 'UNAVAILABLE', 'worker w1: worker w1 is gone'],
      ['r-fail-1', 'INTERNAL', 'worker w1: the executor exited'],
    ]);
    expect(Date.parse(w1!.recentFailures[0]!.at)).to.be.closeTo(Date.now(), 60_000);
    const now = Date.now();
    const page = renderStatus(await status(admin, OPERATOR), now);
    const section = page.split('\n\n').find((part) => part.startsWith('Recent failures'));
    expect(section?.split('\n').slice(1)).to.deep.equal([
      'w1: 2 failed calls since the router started',
      `  ${age(w1!.recentFailures[0]!.at, now)} ago  r-fail-2  UNAVAILABLE: worker w1: worker w1 is gone`,
      `  ${age(w1!.recentFailures[1]!.at, now)} ago  r-fail-1  INTERNAL: worker w1: the executor exited`,
    ]);
  });

  it('keeps the last few failures per worker, and counts them all', () => {
    const failures = new WorkerFailures();
    for (let i = 1; i <= RECENT_FAILURES_KEPT + 2; i += 1) {
      failures.record('w9', {
        at: '',
        requestId: `r${i}`,
        code: 'INTERNAL',
        message: 'x'.repeat(i * 100),
      });
    }
    failures.record('w9', { at: '', requestId: 'r-cancel', code: 'CANCELLED', message: '' });
    const kept = failures.of('w9');
    expect(kept.count).to.equal(RECENT_FAILURES_KEPT + 2);
    expect(kept.recent.map((f) => f.requestId)).to.deep.equal(['r7', 'r6', 'r5', 'r4', 'r3']);
    expect(kept.recent[0]!.message).to.have.length(300);
    expect(failures.of('w8')).to.deep.equal({ recent: [], count: 0 });
  });

  it('answers Slots to tenant credentials only, and only about their own tenant', async () => {
    for (const token of [OPERATOR, W1, ROUTER]) {
      expect(await codeOfRefusal(slots(tenant, token)), token).to.equal(PERMISSION_DENIED);
    }
    expect(await codeOfRefusal(slots(tenant, 'some-unknown-token-123456'))).to.equal(
      UNAUTHENTICATED,
    );
    // A GPU budget: no gpu worker, no slots.
    expect(await slots(tenant, TENANT, { gpu: true })).to.include({ slots: 0, workers: 0 });
  });
});
