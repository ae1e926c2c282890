/**
 * `readie pin` as a child process against a real router on loopback with scripted workers: the
 * operator stages, watches the pre-warm in `status`, flips, sets k, rolls back and removes; each
 * refusal exits 1 with the router's code and words, bad options exit 2, and a tenant's token is
 * refused.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rendezvousSubset } from '../../src/core/placement/index.js';
import type { PinStatusResponse } from '../../src/proto/gen/readie/v1/pins.js';
import { ResidencyState } from '../../src/proto/gen/readie/v1/residency.js';
import { eventually, startTestRouter, type TestRouter } from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { runReadie } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const GiB = 1024 ** 3;
const OPERATOR = 'operator-token-0123456789abcdef';
const TENANT = 'tenant-acme-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';
const WORKERS = ['w1', 'w2', 'w3'];

const CATALOGUE = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [
        { id: 'screen-v1', modules: [], restoreCost: 10, onDemand: true, residentMemory: GiB },
        { id: 'screen-v2', modules: [], restoreCost: 10, onDemand: true, residentMemory: GiB },
      ],
    },
  },
  importCosts: {},
  defaultImportCost: 100,
};

describe('readie pin (the operator CLI)', function () {
  this.timeout(90_000);
  let test: TestRouter;
  let workers: ScriptedWorker[];
  let dir: string;

  const pin = async (args: string[], token = 'operator.token') => {
    const child = runReadie([
      'pin',
      ...args,
      '--router',
      test.address,
      '--insecure',
      '--token-file',
      join(dir, token),
    ]);
    const { code } = await child.exited;
    return { code, out: child.lines.join('\n'), err: child.stderr() };
  };

  before(async () => {
    dir = tempDir('readie-pin-cli-');
    writeFileSync(
      join(dir, 'tokens'),
      [
        `operator ops ${OPERATOR}`,
        `tenant acme ${TENANT}`,
        ...WORKERS.map((id) => `worker ${id} token-${id}-0123456789abcdef`),
      ].join('\n') + '\n',
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    writeFileSync(join(dir, 'operator.token'), `${OPERATOR}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'tenant.token'), `${TENANT}\n`, { mode: 0o600 });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
      catalogue: { revision: 'c1', catalogue: CATALOGUE },
    });
    workers = await Promise.all(
      WORKERS.map((workerId) => ScriptedWorker.start({ workerId, prewarmLoads: 100 })),
    );
    for (const worker of workers) {
      await worker
        .connect(test.address, { token: `token-${worker.workerId}-0123456789abcdef` })
        .reportStatus();
      await worker.reportResidency([], 4 * GiB);
    }
  });

  after(async () => {
    for (const worker of workers) worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('stages, shows the pre-warm progress, flips at the expected revision, and shows the table', async () => {
    const staged = await pin(['stage', '--tenant', 'acme', '--version', 'screen-v1', '--k', '2']);
    expect(staged.code, staged.err).to.equal(0);
    expect(staged.out).to.match(
      /staged: tenant acme -> screen-v1 on 2 workers \(routing revision 0\)/,
    );
    expect(staged.out).to.match(/note: fits: resident memory: the table needs 2GiB/);
    const subset = rendezvousSubset('acme', 'screen-v1', WORKERS, 2);
    await eventually(
      () =>
        subset.every(
          (id) =>
            test.router.state.routing.workers.get(id)?.versions.get('screen-v1')?.state ===
            'resident',
        ),
      'the pre-warm',
    );
    const status = await pin(['status', '--tenant', 'acme', '--json']);
    const parsed = JSON.parse(status.out) as PinStatusResponse;
    expect(parsed.staged[0]).to.deep.include({ version: 'screen-v1', ready: true });
    const flipped = await pin(['flip', '--tenant', 'acme', '--expect-revision', '0']);
    expect(flipped.code, flipped.err).to.equal(0);
    expect(flipped.out).to.match(
      /flipped: tenant acme -> screen-v1 on 2 workers \(routing revision 1\)/,
    );
    const table = await pin(['status']);
    expect(table.out).to.match(/routing revision 1/);
    expect(table.out).to.match(/acme: screen-v1 k=2 revision 1/);
    expect(table.out).to.match(
      /resident budget: the table needs 2GiB, the workers offer 12GiB: fits/,
    );
  });

  it('readie status shows the pin table, staged pins and residency below the cluster', async () => {
    const status = async (...args: string[]) => {
      const child = runReadie([
        'status',
        '--router',
        test.address,
        '--insecure',
        '--token-file',
        join(dir, 'operator.token'),
        ...args,
      ]);
      const { code } = await child.exited;
      return { code, out: child.lines.join('\n'), err: child.stderr() };
    };
    const page = await status();
    expect(page.code, page.err).to.equal(0);
    expect(page.out).to.match(/^Tenant-pinned versions$/m);
    expect(page.out).to.match(/acme: screen-v1 k=2 revision 1/);
    const subset = rendezvousSubset('acme', 'screen-v1', WORKERS, 2);
    expect(page.out).to.match(new RegExp(`^  ${subset[0]}: resident 1GiB of 4GiB`, 'm'));
    const json = await status('--json');
    const parsed = JSON.parse(json.out) as { workers: unknown[]; pins: PinStatusResponse };
    expect(parsed.workers).to.have.length(3);
    expect(parsed.pins.revision).to.equal(1);
    expect(parsed.pins.pins.map((p) => [p.tenantId, p.version])).to.deep.equal([
      ['acme', 'screen-v1'],
    ]);
  });

  it('refuses a stale revision, an alias and a flip before the pre-warm, exiting 1 with the words', async () => {
    const stale = await pin(['flip', '--tenant', 'acme', '--expect-revision', '0']);
    expect(stale.code).to.equal(1);
    expect(stale.err).to.match(
      /readie pin: FAILED_PRECONDITION: the routing table is at revision 1, not 0/,
    );
    const alias = await pin(['stage', '--tenant', 'acme', '--version', 'latest']);
    expect(alias.code).to.equal(1);
    expect(alias.err).to.match(/INVALID_ARGUMENT: "latest" is an alias, not a version/);
    // From here the scripted workers only say they are loading: the flip must wait.
    for (const worker of workers) worker.prewarmLoads = undefined;
    const early = await pin(['stage', '--tenant', 'acme', '--version', 'screen-v2']);
    expect(early.code, early.err).to.equal(0);
    const notYet = await pin(['flip', '--tenant', 'acme']);
    expect(notYet.code).to.equal(1);
    expect(notYet.err).to.match(
      /FAILED_PRECONDITION: version "screen-v2" is not resident on its whole subset/,
    );
  });

  it('flips when ready, rolls back to the retained version, sets k and removes', async () => {
    const subset = rendezvousSubset('acme', 'screen-v2', WORKERS, 2);
    for (const id of subset) {
      await workers
        .find((worker) => worker.workerId === id)
        ?.reportResidency([
          { checkpointId: 'screen-v2', state: ResidencyState.RESIDENCY_STATE_RESIDENT, error: '' },
        ]);
    }
    await eventually(
      () =>
        subset.every(
          (id) =>
            test.router.state.routing.workers.get(id)?.versions.get('screen-v2')?.state ===
            'resident',
        ),
      'the second pre-warm',
    );
    expect((await pin(['flip', '--tenant', 'acme'])).code).to.equal(0);
    const back = await pin(['rollback', '--tenant', 'acme', '--json']);
    expect(back.code, back.err).to.equal(0);
    expect(JSON.parse(back.out)).to.deep.include({
      version: 'screen-v1',
      previousVersion: 'screen-v2',
      revision: 3,
    });
    const k = await pin(['set-k', '--tenant', 'acme', '--k', '3']);
    expect(k.code, k.err).to.equal(0);
    expect(k.out).to.match(/k set: tenant acme -> screen-v1 on 3 workers \(routing revision 4\)/);
    const removed = await pin(['remove', '--tenant', 'acme']);
    expect(removed.code, removed.err).to.equal(0);
    expect(removed.out).to.match(/removed: tenant acme -> \(none\) \(routing revision 5\)/);
    const again = await pin(['remove', '--tenant', 'acme']);
    expect(again.code).to.equal(1);
    expect(again.err).to.match(/NOT_FOUND: tenant acme has no pinned version and nothing staged/);
  });

  it('says so when no credential names the tenant, and when k is more than the fleet can hold', async () => {
    const typo = await pin(['stage', '--tenant', 'acmee', '--version', 'screen-v1']);
    expect(typo.code, typo.err).to.equal(0);
    expect(typo.out).to.include(
      'note: no credential names tenant acmee (no "tenant acmee TOKEN" line in the router\'s tokens file): no call can ask for this pin until one does',
    );
    const known = await pin(['stage', '--tenant', 'acme', '--version', 'screen-v1', '--k', '5']);
    expect(known.code, known.err).to.equal(0);
    expect(known.out).to.not.include('no credential names');
    expect(known.out).to.match(/^staged: tenant acme -> screen-v1 with k 5, on 3 workers /);
    expect(known.out).to.include(
      'note: k is 5, but only 3 workers can hold "screen-v1" now: it is kept on w1, w2, w3; a worker that joins later joins its subset',
    );
  });

  it("exits 2 on bad options, and 1 with PERMISSION_DENIED on a tenant's token", async () => {
    const badK = await pin(['set-k', '--tenant', 'acme', '--k', '0']);
    expect(badK.code).to.equal(2);
    expect(badK.err).to.match(/--k 0: expected a whole number >= 1/);
    const tenant = await pin(['status'], 'tenant.token');
    expect(tenant.code).to.equal(1);
    expect(tenant.err).to.match(/PERMISSION_DENIED/);
  });
});
