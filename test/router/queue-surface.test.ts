/**
 * The admission queue seen and explained (docs/placement.md, "The admission queue"), through a
 * real router with two tenants and a scripted worker of one slot: the client is told its call is
 * queued and then admitted; the operator's Status lists the queue per tenant; a tenant's
 * OwnQueue shows its own calls and nothing of the other's; the router's metrics carry the depth
 * and the wait; replay explain tells the wait and who went first, and why.
 */
import { expect } from 'chai';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdminServiceClient, type StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import {
  TenantServiceClient,
  type OwnQueueResponse,
  type SlotsResponse,
} from '../../src/proto/gen/readie/v1/tenant.js';
import { explainCall } from '../../replay/commands/explain-call.js';
import { openLogSource } from '../../replay/io/log-source.js';
import { renderStatus } from '../../src/cli/status/status-sections.js';
import {
  bearer,
  callConfig,
  codeOf,
  eventually,
  settledLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const ACME = 'acme-token-0123456789abcdef';
const BETA = 'beta-token-0123456789abcdef';
const OPERATOR = 'operator-token-0123456789abcdef';
const W1 = 'worker-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';

describe('router: the admission queue seen and explained', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let admin: AdminServiceClient;
  let tenants: TenantServiceClient;

  before(async () => {
    const dir = tempDir('readie-queue-surface-');
    writeFileSync(
      join(dir, 'tokens'),
      `tenant acme ${ACME}\ntenant beta ${BETA}\nworker w1 ${W1}\noperator ops ${OPERATOR}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    test = await startTestRouter({
      config: { QUEUE_TIMEOUT: 20_000 },
      metrics: '127.0.0.1:0',
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
    });
    worker = await ScriptedWorker.start({ workerId: 'w1', requireToken: ROUTER });
    await worker.connect(test.address, { token: W1 }).reportStatus({ maxContainers: 1 });
    admin = new AdminServiceClient(test.address, credentials.createInsecure());
    tenants = new TenantServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    admin.close();
    tenants.close();
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  function status(): Promise<StatusResponse> {
    return new Promise((resolve, reject) =>
      admin.status({ includeExpiredSessions: false }, bearer(OPERATOR), (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  function ownQueue(token: string, requestId = ''): Promise<OwnQueueResponse> {
    return new Promise((resolve, reject) =>
      tenants.ownQueue({ requestId }, bearer(token), (error: ServiceError | null, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  function slots(token: string): Promise<SlotsResponse> {
    return new Promise((resolve, reject) =>
      tenants.slots(
        { memory: 0, gpuMemory: 0, gpu: false, pinned: false },
        bearer(token),
        (error: ServiceError | null, answer) => (error ? reject(error) : resolve(answer)),
      ),
    );
  }

  async function metrics(): Promise<string> {
    return (await fetch(`http://${test.router.metricsAddress}/metrics`)).text();
  }

  it('tells the client, the operator and the tenant where a queued call stands, and explains its wait', async () => {
    // acme holds the only slot; then acme and beta each queue a call.
    const holder = callConfig();
    // It holds the slot until the test opens its gate: nothing below races a timer.
    const held = run(test.client, 'gate holder', holder, { metadata: bearer(ACME) });
    await eventually(() => test.router.state.reservations.has(holder.requestId), 'the slot held');
    const acme2 = callConfig();
    const acmeSecond = run(test.client, 'echo acme', acme2, { metadata: bearer(ACME) });
    await eventually(() => test.router.state.queue.has(acme2.requestId), 'acme2 queued');
    // One bit of the others' queue: beta hears that another tenant's call waits, acme does not.
    expect((await slots(BETA)).othersWaiting).to.equal(true);
    expect((await slots(ACME)).othersWaiting).to.equal(false);
    const beta1 = callConfig();
    const betaFirst = run(test.client, 'echo beta', beta1, { metadata: bearer(BETA) });
    await eventually(() => test.router.state.queue.has(beta1.requestId), 'beta1 queued');

    // beta's quota: weight 3, at most 50 queued (its share is 3 of the 4 weights listed).
    await new Promise((resolve, reject) =>
      admin.setQuota(
        { tenantId: 'beta', weight: 3, maxQueued: 50, noMaxSlots: false },
        bearer(OPERATOR),
        (error, answer) => (error ? reject(error) : resolve(answer)),
      ),
    );

    // The operator sees the queue per tenant, slots held beside the fair share and the quota.
    const answer = await status();
    expect(answer.queueTimeoutMs).to.equal(20_000);
    const byTenant = new Map(answer.queue.map((view) => [view.tenantId, view]));
    expect(byTenant.get('acme')).to.deep.include({ depth: 1, slotsHeld: 1, weight: 1 });
    expect(byTenant.get('acme')?.fairShare).to.equal(0.25);
    expect(byTenant.get('beta')).to.deep.include({
      depth: 1,
      slotsHeld: 0,
      weight: 3,
      maxQueued: 50,
    });
    expect(byTenant.get('beta')?.fairShare).to.equal(0.75);
    expect(byTenant.get('beta')?.oldestQueuedAt).to.equal(
      test.router.state.queue.get(beta1.requestId)?.at,
    );
    const page = renderStatus(answer, Date.now());
    expect(page).to.include('Admission queue\nQUEUE_TIMEOUT 20s; 2 calls waiting');
    expect(page).to.match(/│ beta +│ 1 \/ 50 +│/);

    // Each tenant sees its own queued calls only.
    const betaView = await ownQueue(BETA);
    expect(betaView).to.deep.include({ tenantId: 'beta', depth: 1, slotsHeld: 0, maxQueued: 50 });
    expect(betaView.calls.map((call) => [call.requestId, call.position])).to.deep.equal([
      [beta1.requestId, 0],
    ]);
    expect((await ownQueue(BETA, acme2.requestId)).calls).to.deep.equal([]);
    const acmeView = await ownQueue(ACME);
    expect(acmeView.calls.map((call) => call.requestId)).to.deep.equal([acme2.requestId]);
    expect(acmeView.slotsHeld).to.equal(1);

    // The depth per tenant on the metrics endpoint.
    const queuedMetrics = await metrics();
    expect(queuedMetrics).to.include('readie_router_queue_depth{tenant="beta"} 1');
    expect(queuedMetrics).to.include('readie_router_queue_depth{tenant="acme"} 1');

    // Both run once the slot frees (ties at 0 slots held go by tenant ID: acme first).
    worker.open('holder');
    const [acmeOutcome, betaOutcome] = await Promise.all([acmeSecond, betaFirst]);
    expect(codeOf(await held)).to.equal('OK');
    expect(codeOf(acmeOutcome)).to.equal('OK');
    expect(codeOf(betaOutcome)).to.equal('OK');
    expect(betaOutcome.payload).to.equal('echo beta');
    // The client heard it was queued (nothing of beta's own ahead), then admitted.
    expect(betaOutcome.queue).to.deep.equal([
      { queued: true, ahead: 0 },
      { queued: false, ahead: 0 },
    ]);
    const after = await metrics();
    expect(after).to.match(
      /readie_router_queue_wait_seconds_count\{tenant="beta",outcome="admitted"\} 1\n/,
    );
    expect(after).to.not.include('readie_router_queue_depth{tenant="beta"} 1');

    // replay explain: queued at, admitted at, and acme2 admitted first on the tie.
    await settledLog(test);
    const source = await openLogSource(test.logDir);
    try {
      const explained = await explainCall(source, { requestId: beta1.requestId });
      const wait = explained?.queueWait;
      expect(wait?.admitted).to.not.equal(null);
      expect(Date.parse(wait!.admitted!.at)).to.be.at.least(Date.parse(wait!.queuedAt));
      expect(wait?.admittedBefore).to.equal(1);
      expect(wait?.before[0]).to.deep.include({
        requestId: acme2.requestId,
        tenantId: 'acme',
        held: 0,
        ownHeld: 0,
        why: 'tie at 0 slots held, its tenant ID first',
      });
    } finally {
      await source.close();
    }
  });
});
