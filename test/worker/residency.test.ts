/**
 * A real worker's versions (template backend): on-demand versions are not built at start; a
 * pinned call cold-loads its version (reported loading, then resident) and is served by exactly
 * it; a failed load ends the call FAILED_PRECONDITION naming the version; the resident budget
 * evicts the least recently used version the router did not protect and no call uses; the
 * router's ResidencyService (Protect, Prewarm) is the router's alone.
 */
import { expect } from 'chai';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import type { Catalogue } from '../../src/events/catalogue.js';
import { ResidencyServiceClient, ResidencyState } from '../../src/proto/gen/readie/v1/residency.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const MiB = 1024 ** 2;

/** A version whose setup stands in for loading a model: it records which version it is. */
const version = (id: string, setup = `VERSION = ${JSON.stringify(id)}\n`) => ({
  id,
  modules: [],
  restoreCost: 10,
  onDemand: true,
  residentMemory: 100 * MiB,
  setup,
});

const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        version('v1'),
        version('v2'),
        version('v3'),
        version('broken', 'raise RuntimeError("weights file missing")\n'),
      ],
    },
  },
  importCosts: {},
  defaultImportCost: 100,
};

const WHICH = py`
  def which():
      import readie_checkpoint
      return readie_checkpoint.VERSION
`;

const ONE = py`
  def one():
      return 1
`;

/** Residency states the worker reported for `id`, in order. */
function reported(harness: Harness, id: string): string[] {
  return harness.router
    .residency()
    .flatMap((report) => report.versions)
    .filter((v) => v.checkpointId === id)
    .map((v) => ResidencyState[v.state].replace('RESIDENCY_STATE_', '').toLowerCase());
}

const pinned = (id: string, fields: Parameters<typeof header>[0] = {}) =>
  header({
    version: id,
    coldLoad: true,
    routingRevision: 3,
    ...fields,
    ids: { checkpointId: id, ...fields.ids },
  });

describe('worker: versions, cold loads and the resident budget', function () {
  this.timeout(120_000);
  let harness: Harness;
  let residency: ResidencyServiceClient;

  before(async () => {
    // Room for two versions of 100 MiB.
    harness = await startHarness({
      catalogue: CATALOGUE,
      flags: { residentMemory: '200MiB', standby: '0' },
    });
    residency = new ResidencyServiceClient(
      `127.0.0.1:${harness.worker.port}`,
      credentials.createInsecure(),
    );
  });
  after(async () => {
    residency?.close();
    await harness?.stop();
    cleanTempDirs();
  });

  const protect = (checkpointIds: string[], seq: number) =>
    new Promise<void>((resolve, reject) =>
      residency.protect({ checkpointIds, seq }, new Metadata(), (error) =>
        error ? reject(error) : resolve(),
      ),
    );

  it('builds no on-demand version at start, and reports its budget after registering', async () => {
    expect(harness.worker.backend?.held()).to.deep.equal(['checkpoint_0']);
    await harness.router.waitFor((report) => report.kind === 'residency');
    expect(harness.router.residency()[0]?.residentMemory).to.equal(200 * MiB);
  });

  it('cold-loads the version of a pinned call, reports loading then resident, and is served by it', async () => {
    const result = await execute(harness.client, pinned('v1'), jsonCall(WHICH, 'which'));
    expect(result.code, result.details).to.equal(status.OK);
    expect(envelopeOf(result).value).to.equal('v1');
    expect(result.ids).to.deep.include({ checkpointId: 'v1', version: 'v1', routingRevision: 3 });
    await harness.router.waitFor(() => reported(harness, 'v1').includes('resident'));
    // Then (the template's arrival changed its checkpoints) a status report and a full report.
    expect(reported(harness, 'v1').slice(0, 2)).to.deep.equal(['loading', 'resident']);
    expect(new Set(reported(harness, 'v1').slice(1))).to.deep.equal(new Set(['resident']));
    expect(harness.worker.versions?.stateOf('v1')).to.equal('resident');
  });

  it('ends a call whose version fails to load FAILED_PRECONDITION, naming the version and why', async () => {
    const result = await execute(harness.client, pinned('broken'), jsonCall(WHICH, 'which'));
    expect(result.code).to.equal(status.FAILED_PRECONDITION);
    expect(result.details).to.match(
      /version "broken" could not be loaded on worker .*weights file missing/,
    );
    expect(result.trailers['readie-version']).to.equal('broken');
    await harness.router.waitFor(() => reported(harness, 'broken').includes('failed'));
    const failed = harness.router
      .residency()
      .flatMap((r) => r.versions)
      .find((v) => v.checkpointId === 'broken' && v.error !== '');
    expect(failed?.error).to.match(/weights file missing/);
  });

  it('evicts the least recently used unprotected version when a load would exceed the budget', async () => {
    await execute(harness.client, pinned('v2'), jsonCall(WHICH, 'which'));
    // v1 and v2 fill the budget; v1 is used again, so v2 is now the least recently used.
    await execute(harness.client, pinned('v1', { coldLoad: false }), jsonCall(WHICH, 'which'));
    const third = await execute(harness.client, pinned('v3'), jsonCall(WHICH, 'which'));
    expect(envelopeOf(third).value).to.equal('v3');
    expect(harness.worker.versions?.stateOf('v2')).to.equal('evicted');
    expect(harness.worker.versions?.stateOf('v1')).to.equal('resident');
    await harness.router.waitFor(() => reported(harness, 'v2').includes('evicted'));
  });

  it('never evicts a protected version: it takes the next least recently used, or refuses the load', async () => {
    // Resident now: v1 and v3. Protect v1 (least recently used): loading v2 must evict v3.
    await protect(['v1'], 10);
    await execute(harness.client, pinned('v2'), jsonCall(WHICH, 'which'));
    expect(harness.worker.versions?.stateOf('v1')).to.equal('resident');
    expect(harness.worker.versions?.stateOf('v3')).to.equal('evicted');
    // Both resident versions protected: there is no room, and the load fails without evicting.
    await protect(['v1', 'v2'], 11);
    const refused = await execute(harness.client, pinned('v3'), jsonCall(WHICH, 'which'));
    expect(refused.code).to.equal(status.FAILED_PRECONDITION);
    expect(refused.details).to.match(
      /resident budget of 200MiB is full: .*v1 \(protected\), v2 \(protected\)/,
    );
    expect(harness.worker.versions?.stateOf('v1')).to.equal('resident');
    expect(harness.worker.versions?.stateOf('v2')).to.equal('resident');
    // An older set never replaces a newer one.
    await protect([], 5);
    expect([...(harness.worker.versions?.protected ?? [])]).to.deep.equal(['v1', 'v2']);
    await protect([], 12);
  });

  it('pre-warms a version the router asks for, and refuses a version its catalogue lacks', async () => {
    const answer = await new Promise<{ state: ResidencyState }>((resolve, reject) =>
      residency.prewarm({ checkpointId: 'v3' }, new Metadata(), (error, response) =>
        error ? reject(error) : resolve(response),
      ),
    );
    expect(answer.state).to.equal(ResidencyState.RESIDENCY_STATE_LOADING);
    await harness.router.waitFor(
      () => reported(harness, 'v3').filter((s) => s === 'resident').length >= 2,
    );
    const unknown = await new Promise<ServiceError>((resolve) =>
      residency.prewarm({ checkpointId: 'v9' }, new Metadata(), (error) =>
        resolve(error as ServiceError),
      ),
    );
    expect(unknown.code).to.equal(status.NOT_FOUND);
  });

  it("refuses a session's container that does not hold the call's version", async () => {
    const first = await execute(
      harness.client,
      header({ ids: { sessionId: 'S-cold', checkpointId: '' } }),
      jsonCall(ONE, 'one'),
    );
    const containerId = first.ids?.containerId ?? '';
    expect(containerId).to.not.equal('');
    const reuse = await execute(
      harness.client,
      header({ version: 'v1', ids: { sessionId: 'S-cold', containerId, checkpointId: 'v1' } }),
      jsonCall(WHICH, 'which'),
    );
    expect(reuse.code).to.equal(status.FAILED_PRECONDITION);
    expect(reuse.details).to.match(/holds no version \(a cold start\), not version "v1"/);
  });
});
