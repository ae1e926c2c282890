/**
 * Tenant-pinned versions through a real router over loopback gRPC, with scripted workers: pin
 * changes through the operator's AdminService, the workers told what to keep and what to
 * pre-warm, pinned calls routed to holders with their version and revision in the answer IDs and
 * the trailers, a shed with its retry-after hint (trailer and google.rpc.RetryInfo), refusals.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, type Metadata, type ServiceError } from '@grpc/grpc-js';
import { RETRY_INFO_TYPE_URL } from '../../src/core/calls/answer-trailers.js';
import { rendezvousSubset } from '../../src/core/placement/index.js';
import type { ClusterEvent } from '../../src/events/index.js';
import { RetryInfo } from '../../src/proto/gen/google/rpc/error_details.js';
import { Status } from '../../src/proto/gen/google/rpc/status.js';
import { AdminServiceClient } from '../../src/proto/gen/readie/v1/admin.js';
import type {
  FlipPinResponse,
  PinChange,
  PinStatusResponse,
  StagePinResponse,
} from '../../src/proto/gen/readie/v1/pins.js';
import { ResidencyState } from '../../src/proto/gen/readie/v1/residency.js';
import { TenantServiceClient, type SlotsResponse } from '../../src/proto/gen/readie/v1/tenant.js';
import {
  bearer,
  callConfig,
  chunk,
  collect,
  configMessage,
  eventually,
  readLog,
  settledLog,
  startTestRouter,
  storyOf,
  type CallOutcome,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  PINNED_QUEUE_RULES_VERSION,
  PLACEMENT_RULES_VERSION,
} from '../../src/projections/rules-steps.js';

const GiB = 1024 ** 3;
const ACME = 'tenant-acme-0123456789abcdef';
const GLOBEX = 'tenant-globex-0123456789abcdef';
const INITECH = 'tenant-initech-0123456789abcdef';
const OPERATOR = 'operator-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';
const WORKERS = ['w1', 'w2', 'w3'];
const workerToken = (id: string) => `worker-${id}-0123456789abcdef`;

const CATALOGUE = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        { id: 'screen-v1', modules: [], restoreCost: 10, onDemand: true, residentMemory: GiB },
        { id: 'screen-v2', modules: [], restoreCost: 10, onDemand: true, residentMemory: GiB },
        // A load that takes a minute: longer than the 20 s deadline of every call here.
        {
          id: 'screen-v3',
          modules: [],
          restoreCost: 10,
          onDemand: true,
          residentMemory: GiB,
          loadCost: 60_000,
        },
      ],
    },
  },
  importCosts: {},
  defaultImportCost: 100,
};

/** A unary call with a token, as a promise. */
function ask<Res>(
  send: (
    metadata: Metadata,
    callback: (error: ServiceError | null, response: Res) => void,
  ) => unknown,
  token = OPERATOR,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    send(bearer(token), (error, response) => (error ? reject(error) : resolve(response))),
  );
}

function refusal(promise: Promise<unknown>): Promise<ServiceError> {
  return promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: ServiceError) => error,
  );
}

describe('router: tenant-pinned versions', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let workers: ScriptedWorker[];
  let admin: AdminServiceClient;

  const stage = (tenantId: string, version: string, k?: number) =>
    ask<StagePinResponse>((m, cb) =>
      admin.stagePin({ tenantId, version, k, force: false }, m, cb),
    ).then((r) => r.change as PinChange);
  const flip = (tenantId: string, expectRevision?: number, force = false) =>
    ask<FlipPinResponse>((m, cb) => admin.flipPin({ tenantId, expectRevision, force }, m, cb)).then(
      (r) => r.change as PinChange,
    );
  const pinStatus = (tenantId = '') =>
    ask<PinStatusResponse>((m, cb) => admin.pinStatus({ tenantId }, m, cb));
  const pinnedCall = (
    token: string,
    command: string,
    fields: Parameters<typeof callConfig>[0] = {},
  ) => {
    const stream = test.client.requestExecution(bearer(token), { deadline: Date.now() + 20_000 });
    const outcome = collect(stream);
    stream.write(configMessage(callConfig({ pinned: true, ...fields })));
    stream.write(chunk(command));
    stream.end();
    return outcome;
  };
  const events = () => readLog(test.logDir);
  const byId = (id: string) => workers.find((worker) => worker.workerId === id) as ScriptedWorker;

  before(async () => {
    const dir = tempDir('readie-pinned-');
    writeFileSync(
      join(dir, 'tokens'),
      [
        `tenant acme ${ACME}`,
        `tenant globex ${GLOBEX}`,
        `tenant initech ${INITECH}`,
        `operator ops ${OPERATOR}`,
        ...WORKERS.map((id) => `worker ${id} ${workerToken(id)}`),
      ].join('\n') + '\n',
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    writeFileSync(join(dir, 'catalogue.json'), JSON.stringify(CATALOGUE));
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
      catalogue: { revision: 'c1', catalogue: CATALOGUE },
    });
    workers = await Promise.all(
      WORKERS.map((workerId) =>
        ScriptedWorker.start({ workerId, requireToken: ROUTER, prewarmLoads: 50 }),
      ),
    );
    for (const worker of workers) {
      await worker.connect(test.address, { token: workerToken(worker.workerId) }).reportStatus();
      await worker.reportResidency([], 4 * GiB);
    }
    admin = new AdminServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    admin.close();
    for (const worker of workers) worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('stages a pin: PinStaged, the subset is protected and asked to pre-warm, then reports resident', async () => {
    const change = await stage('acme', 'screen-v1', 2);
    const subset = rendezvousSubset('acme', 'screen-v1', WORKERS, 2);
    expect(change.workers).to.have.members(subset);
    expect(change.notes.join(' ')).to.match(/fits/);
    for (const id of subset) {
      await eventually(() => byId(id).prewarms.includes('screen-v1'), `${id} asked to pre-warm`);
      await eventually(
        () => byId(id).protects.at(-1)?.checkpointIds.includes('screen-v1') === true,
        `${id} told to keep screen-v1`,
      );
      expect(byId(id).protects.at(-1)?.authorization).to.equal(`Bearer ${ROUTER}`);
    }
    const outsider = WORKERS.find((id) => !subset.includes(id)) as string;
    expect(byId(outsider).prewarms).to.deep.equal([]);
    // Ready once every worker of the subset reports it resident (under load one lags).
    await eventually(
      () =>
        subset.every(
          (id) =>
            test.router.state.routing.workers.get(id)?.versions.get('screen-v1')?.state ===
            'resident',
        ),
      'the subset reports resident',
    );
    const status = await pinStatus('acme');
    expect(status.staged[0]).to.deep.include({
      tenantId: 'acme',
      version: 'screen-v1',
      ready: true,
    });
    // A report is answered before its events commit: read the log once it holds them all.
    const types = (await settledLog(test)).map((event) => event.type);
    expect(types).to.include.members([
      'PinStaged',
      'ResidencyProtected',
      'ResidencyChanged',
      'ResidencyBudget',
    ]);
  });

  it('refuses a stale revision, an alias, an unknown version and a tenant credential, appending nothing', async () => {
    const before = (await settledLog(test)).length;
    expect((await refusal(flip('acme', 7))).details).to.match(/at revision 0, not 7/);
    expect((await refusal(stage('acme', 'latest'))).details).to.match(/is an alias, not a version/);
    expect((await refusal(stage('acme', 'screen-v9'))).code).to.equal(5);
    const tenantTry = await refusal(
      ask<StagePinResponse>(
        (m, cb) => admin.stagePin({ tenantId: 'acme', version: 'screen-v1', force: false }, m, cb),
        ACME,
      ),
    );
    expect(tenantTry.code).to.equal(7);
    expect((await settledLog(test)).length).to.equal(before);
  });

  it('flips, and routes pinned calls to a holder with the version and revision in IDs and trailers', async () => {
    const change = await flip('acme', 0);
    expect(change).to.deep.include({ revision: 1, version: 'screen-v1' });
    const outcome = await pinnedCall(ACME, 'echo judged', { requestId: 'acme-1' });
    expect(outcome.error).to.equal(undefined);
    expect(outcome.payload).to.equal('echo judged');
    expect(outcome.ids.at(-1)).to.deep.include({
      version: 'screen-v1',
      routingRevision: 1,
      checkpointId: 'screen-v1',
    });
    const subset = rendezvousSubset('acme', 'screen-v1', WORKERS, 2);
    const served = workers.find((worker) =>
      worker.calls.some((c) => c.header.ids?.requestId === 'acme-1'),
    );
    expect(subset).to.include(served?.workerId);
    const header = served?.calls.find((c) => c.header.ids?.requestId === 'acme-1')?.header;
    expect(header).to.deep.include({ version: 'screen-v1', coldLoad: false, routingRevision: 1 });
    const isPlaced = (e: ClusterEvent): e is Extract<ClusterEvent, { type: 'CallPlaced' }> =>
      e.type === 'CallPlaced' && e.requestId === 'acme-1';
    await eventually(() => events().some(isPlaced), 'the placement on disk');
    const placed = events().find(isPlaced);
    expect(placed).to.deep.include({ version: 'screen-v1', routingRevision: 1, coldLoad: false });
  });

  it("counts a tenant's slots for pinned calls on its version's subset only", async () => {
    const tenants = new TenantServiceClient(test.address, credentials.createInsecure());
    const slots = (token: string, pinned: boolean) =>
      ask<SlotsResponse>(
        (m, cb) => tenants.slots({ gpuMemory: 0, gpu: false, pinned }, m, cb),
        token,
      );
    try {
      const all = await slots(ACME, false);
      const pinned = await slots(ACME, true);
      expect(all.workers).to.equal(3);
      expect(pinned.workers).to.equal(2);
      expect(pinned.slots).to.be.greaterThan(0);
      expect(pinned.slots).to.be.lessThan(all.slots);
      expect((await refusal(slots(GLOBEX, true))).details).to.match(
        /tenant globex has no pinned version/,
      );
      expect((await slots(GLOBEX, false)).slots).to.equal(all.slots);
    } finally {
      tenants.close();
    }
  });

  it('answers an unpinned tenant call by the seed rules, and a tenant without a pin FAILED_PRECONDITION', async () => {
    const plain = await pinnedCall(GLOBEX, 'echo x', { requestId: 'globex-plain', pinned: false });
    expect(plain.error).to.equal(undefined);
    expect(plain.ids.at(-1)).to.deep.include({
      version: '',
      routingRevision: 0,
      checkpointId: 'checkpoint_0',
    });
    const refused = await pinnedCall(GLOBEX, 'echo x', { requestId: 'globex-pinned' });
    expect(refused.error?.code).to.equal(9);
    expect(refused.error?.details).to.match(/tenant globex has no pinned version/);
    expect(refused.error?.metadata.get('readie-request-id')).to.deep.equal(['globex-pinned']);
  });

  it('sheds while the loader is busy loading, with retry-after-ms and a RetryInfo, and the retry keeps its version', async () => {
    // globex pinned to screen-v2 with no pre-warm: its first call cold-loads, the next is shed.
    await stage('globex', 'screen-v2', 1);
    const subset = rendezvousSubset('globex', 'screen-v2', WORKERS, 1);
    const loader = byId(subset[0] as string);
    // The stage's pre-warm reports loading, then resident: let both land first, or its resident
    // may overtake the loading report below and the call would find a holder.
    await eventually(
      () =>
        test.router.state.routing.workers.get(loader.workerId)?.versions.get('screen-v2')?.state ===
        'resident',
      "the stage's pre-warm done",
    );
    await flip('globex', undefined, true);
    // Forget what the pre-warm did: the loader reports it is still loading (no resident yet).
    await loader.reportResidency(
      [{ checkpointId: 'screen-v2', state: ResidencyState.RESIDENCY_STATE_LOADING, error: '' }],
      4 * GiB,
    );
    const shed: CallOutcome = await pinnedCall(GLOBEX, 'echo x', { requestId: 'globex-shed' });
    expect(shed.error?.code).to.equal(8);
    expect(shed.error?.details).to.match(/retry in 2s/);
    const trailers = shed.error?.metadata;
    expect(trailers?.get('retry-after-ms')).to.deep.equal(['2000']);
    expect(trailers?.get('readie-version')).to.deep.equal(['screen-v2']);
    expect(trailers?.get('readie-routing-revision')).to.deep.equal(['2']);
    const details = trailers?.get('grpc-status-details-bin')[0] as Buffer;
    const status = Status.decode(details);
    expect(status.code).to.equal(8);
    expect(status.details[0]?.typeUrl).to.equal(RETRY_INFO_TYPE_URL);
    expect(RetryInfo.decode(status.details[0]?.value ?? new Uint8Array()).retryDelay).to.deep.equal(
      { seconds: 2, nanos: 0 },
    );
    // The operator flips globex to screen-v1 meanwhile; the retry still meets screen-v2.
    await stage('globex', 'screen-v1', 1);
    await flip('globex', undefined, true);
    await loader.reportResidency(
      [{ checkpointId: 'screen-v2', state: ResidencyState.RESIDENCY_STATE_RESIDENT, error: '' }],
      4 * GiB,
    );
    const retry = await pinnedCall(GLOBEX, 'echo again', {
      requestId: 'globex-retry',
      retryOf: 'globex-shed',
    });
    expect(retry.error).to.equal(undefined);
    expect(retry.ids.at(-1)).to.deep.include({ version: 'screen-v2', routingRevision: 2 });
    // A retry may not name another tenant's call.
    const stolen = await pinnedCall(GLOBEX, 'echo x', {
      requestId: 'globex-steal',
      retryOf: 'acme-1',
    });
    expect(stolen.error?.code).to.equal(7);
  });

  it('shows the table, drain per version and the fleet budget in PinStatus', async () => {
    const status = await pinStatus();
    expect(status.revision).to.equal(3);
    expect(status.pins.map((pin) => [pin.tenantId, pin.version, pin.revision])).to.deep.equal([
      ['acme', 'screen-v1', 1],
      ['globex', 'screen-v1', 3],
    ]);
    expect(status.retained.map((r) => [r.tenantId, r.version])).to.deep.include([
      'globex',
      'screen-v2',
    ]);
    expect(status.budget).to.deep.include({ offered: 12 * GiB, fits: true });
    expect(status.workers.map((worker) => worker.workerId)).to.deep.equal(WORKERS);
  });

  it("sheds a call whose version's cold load would outlast its deadline (RESOURCE_EXHAUSTED, retry-after-ms), and places it warm on a holder", async () => {
    await stage('initech', 'screen-v3', 1);
    const [member] = rendezvousSubset('initech', 'screen-v3', WORKERS, 1) as [string];
    const loader = byId(member);
    await eventually(
      () =>
        test.router.state.routing.workers.get(member)?.versions.get('screen-v3')?.state ===
        'resident',
      "the stage's pre-warm done",
    );
    await flip('initech', undefined, true);
    // The version leaves the member's memory: the next call would have to load it again.
    await loader.reportResidency(
      [{ checkpointId: 'screen-v3', state: ResidencyState.RESIDENCY_STATE_EVICTED, error: '' }],
      4 * GiB,
    );
    await eventually(
      () =>
        test.router.state.routing.workers.get(member)?.versions.get('screen-v3')?.state ===
        'evicted',
      'the eviction reported',
    );
    const prewarmsOf = () => loader.prewarms.filter((version) => version === 'screen-v3').length;
    const askedBefore = prewarmsOf();
    const shed = await pinnedCall(INITECH, 'echo x', { requestId: 'initech-late' });
    expect(shed.error?.code, shed.error?.details).to.equal(8);
    expect(shed.error?.details).to.match(
      /^version "screen-v3" is not resident on its subset and a cold load on w\d takes 1m \(its catalogue loadCost\), but the caller's deadline leaves only \d+m?s \(a load it would not wait for is not started\): retry in 2s \(ROUTING_RETRY_AFTER\)$/,
    );
    expect(shed.error?.metadata.get('retry-after-ms')).to.deep.equal(['2000']);
    expect(shed.error?.metadata.get('readie-version')).to.deep.equal(['screen-v3']);
    const isLate = (event: ClusterEvent) =>
      event.type === 'CallRejected' && event.requestId === 'initech-late';
    await eventually(() => events().some(isLate), 'the shed on disk');
    const logged = events().filter(
      (event): event is Extract<ClusterEvent, { type: 'CallRequested' | 'CallRejected' }> =>
        (event.type === 'CallRequested' || event.type === 'CallRejected') &&
        event.requestId === 'initech-late',
    );
    expect(logged.map((event) => event.type)).to.deep.equal(['CallRequested', 'CallRejected']);
    const requested = logged[0] as Extract<ClusterEvent, { type: 'CallRequested' }>;
    expect(requested.deadlineMs).to.be.within(10_000, 20_000);
    expect(logged[1]).to.deep.include({ retryAfterMs: 2000, version: 'screen-v3' });
    // The call did not wait for a load, but the member is asked to pre-warm the version (it
    // reports loading, then resident), and then the same deadline is no obstacle.
    await eventually(() => prewarmsOf() > askedBefore, 'the pre-warm asked');
    await eventually(
      () =>
        test.router.state.routing.workers.get(member)?.versions.get('screen-v3')?.state ===
        'resident',
      'the version resident again',
    );
    const warm = await pinnedCall(INITECH, 'echo warm', { requestId: 'initech-warm' });
    expect(warm.error).to.equal(undefined);
    expect(warm.ids.at(-1)).to.deep.include({ version: 'screen-v3', workerId: member });
  });

  // Last: it fills initech's one-worker subset (screen-v3, resident since the test above).
  it('queues a pinned call its full subset has no room for (rules 9), though other workers are idle, and runs it there once a slot frees', async () => {
    const [member] = rendezvousSubset('initech', 'screen-v3', WORKERS, 1) as [string];
    const state = () => test.router.state;
    // Eight calls hold the member's eight container slots (some may wait themselves) until the
    // test opens their gates: the slots cannot free before the ninth call is queued.
    const holding = Array.from({ length: 8 }, (_, i) =>
      pinnedCall(INITECH, `gate initech-hold-${i}`, { requestId: `initech-hold-${i}` }),
    );
    await eventually(
      () =>
        [...state().reservations.values()].filter((r) => r.workerId === member).length +
          state().queue.size >=
        8,
      'the subset full',
    );
    const queued = pinnedCall(INITECH, 'echo waited', { requestId: 'initech-queued' });
    await eventually(() => state().queue.has('initech-queued'), 'the pinned call queued');
    for (let i = 0; i < 8; i += 1) byId(member).open(`initech-hold-${i}`);
    const outcome = await queued;
    expect(outcome.error).to.equal(undefined);
    expect(outcome.payload).to.equal('echo waited');
    expect(outcome.queue.map((notice) => notice.queued)).to.deep.equal([true, false]);
    expect(outcome.ids.at(-1)).to.deep.include({ version: 'screen-v3', workerId: member });
    for (const held of await Promise.all(holding)) expect(held.error).to.equal(undefined);
    // Nothing of initech ran outside its subset, though the other workers had room throughout.
    for (const worker of workers.filter((w) => w.workerId !== member)) {
      const ids = worker.calls.map((c) => c.header.ids?.requestId ?? '');
      expect(ids.filter((id) => id.startsWith('initech-'))).to.deep.equal([]);
    }
    let story: string[] = [];
    await eventually(() => {
      story = storyOf(events(), 'initech-queued');
      return story.includes('CallFinished');
    }, 'the queued call finished on disk');
    expect(story.slice(0, 4)).to.deep.equal([
      'CallRequested',
      'CallQueued',
      'CallAdmitted',
      'CallPlaced',
    ]);
    const started = events().find((e) => e.type === 'RouterStarted');
    // Today's rules, which queue pinned calls (9 on).
    expect(started?.type === 'RouterStarted' && started.rulesVersion).to.equal(
      PLACEMENT_RULES_VERSION,
    );
    expect(PLACEMENT_RULES_VERSION).to.be.at.least(PINNED_QUEUE_RULES_VERSION);
  });
});
