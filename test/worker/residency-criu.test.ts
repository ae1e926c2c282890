/**
 * Versions with the CRIU backend: a cold load dumps the version's image; evicting it keeps the
 * image (reported `cached`), and the next cold load restores from that cached tier instead of
 * building the version again. Needs a working CRIU (deploy/install-criu.sh; CI installs it).
 */
import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import type { Catalogue } from '../../src/events/catalogue.js';
import type { CriuBackend } from '../../src/worker/checkpoints/index.js';
import { requireCriu } from '../support/criu.js';
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

const version = (id: string) => ({
  id,
  modules: [],
  restoreCost: 10,
  onDemand: true,
  residentMemory: 100 * MiB,
  setup: `VERSION = ${JSON.stringify(id)}\n`,
});

const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        version('c1'),
        version('c2'),
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

const pinned = (id: string) =>
  header({ version: id, coldLoad: true, routingRevision: 1, ids: { checkpointId: id } });

describe('worker: versions with the CRIU backend', function () {
  this.timeout(180_000);
  let harness: Harness;

  before(async function () {
    this.timeout(180_000);
    await requireCriu(this);
    // Room for one version: loading the second evicts the first.
    harness = await startHarness({
      catalogue: CATALOGUE,
      flags: { restoreBackend: 'criu', residentMemory: '150MiB', standby: '0' },
    });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('evicts to the cached tier and restores from it on the next cold load, with no new dump', async () => {
    const backend = harness.worker.backend as CriuBackend;
    const dumpsAtStart = backend.dumps;
    const first = await execute(harness.client, pinned('c1'), jsonCall(WHICH, 'which'));
    expect(first.code, first.details).to.equal(status.OK);
    expect(envelopeOf(first).value).to.equal('c1');
    expect(backend.dumps).to.equal(dumpsAtStart + 1);
    const second = await execute(harness.client, pinned('c2'), jsonCall(WHICH, 'which'));
    expect(envelopeOf(second).value).to.equal('c2');
    expect(harness.worker.versions?.stateOf('c1')).to.equal('cached');
    expect(backend.hasImage('c1')).to.equal(true);
    const again = await execute(harness.client, pinned('c1'), jsonCall(WHICH, 'which'));
    expect(envelopeOf(again).value).to.equal('c1');
    expect(backend.dumps, 'c1 came back from its image').to.equal(dumpsAtStart + 2);
    expect(harness.worker.versions?.stateOf('c1')).to.equal('resident');
    expect(harness.worker.versions?.stateOf('c2')).to.equal('cached');
  });
});
