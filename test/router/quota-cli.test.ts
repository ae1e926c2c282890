/**
 * `readie quota` as a child process against a real router on loopback (real gRPC, a tokens file):
 * the operator sets, reads and removes quotas; answers carry the quota table's revision; a stale
 * `--expect-revision`, a bad weight or cap (naming the field) and a tenant's token are refused; a
 * quota for a tenant no credential names is kept with a warning naming the tenants it knows.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { QuotaStatusResponse } from '../../src/proto/gen/readie/v1/quotas.js';
import { startTestRouter, type TestRouter } from '../support/router/harness.js';
import { runReadie } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const OPERATOR = 'operator-token-0123456789abcdef';
const ACME = 'tenant-acme-0123456789abcdef';
const GLOBEX = 'tenant-globex-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';

describe('readie quota (the operator CLI)', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let dir: string;

  const quota = async (args: string[], token = 'operator.token') => {
    const child = runReadie([
      'quota',
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
    dir = tempDir('readie-quota-cli-');
    writeFileSync(
      join(dir, 'tokens'),
      `operator ops ${OPERATOR}\ntenant acme ${ACME}\ntenant globex ${GLOBEX}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    writeFileSync(join(dir, 'operator.token'), `${OPERATOR}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'tenant.token'), `${ACME}\n`, { mode: 0o600 });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
    });
  });

  after(async () => {
    await test.close();
    cleanTempDirs();
  });

  it('sets a quota (logged, with the revision), shows the table, and removes it at the expected revision', async () => {
    const set = await quota(['set', '--tenant', 'acme', '--max-slots', '12', '--weight', '2']);
    expect(set.code, set.err).to.equal(0);
    expect(set.out).to.contain(
      'set: tenant acme -> weight 2, maxSlots 12, maxQueued 2000 (quota revision 1)',
    );
    expect(set.out).to.contain('previous: weight 1, maxSlots no cap, maxQueued 2000');
    expect(set.out).to.not.contain('warning');
    const events = test.router.state.quotas;
    expect(events.entries.get('acme')).to.deep.equal({
      weight: 2,
      maxSlots: 12,
      maxQueued: 2000,
      revision: 1,
    });
    const queued = await quota([
      'set',
      '--tenant',
      'acme',
      '--max-queued',
      '5',
      '--expect-revision',
      '1',
    ]);
    expect(queued.code, queued.err).to.equal(0);
    expect(queued.out).to.contain('weight 2, maxSlots 12, maxQueued 5 (quota revision 2)');

    const status = await quota(['status']);
    expect(status.code, status.err).to.equal(0);
    expect(status.out).to.contain('quota table: revision 2');
    expect(status.out).to.contain(
      'acme: weight 2, maxSlots 12, maxQueued 5 (revision 2); holds 0 slots, 0 queued',
    );
    const json = JSON.parse(
      (await quota(['status', '--tenant', 'globex', '--json'])).out,
    ) as QuotaStatusResponse;
    expect(json.revision).to.equal(2);
    expect(json.quotas).to.deep.equal([
      {
        tenantId: 'globex',
        quota: { weight: 1, maxQueued: 2000 },
        revision: 0,
        slotsHeld: 0,
        queued: 0,
      },
    ]);

    const removed = await quota(['remove', '--tenant', 'acme', '--expect-revision', '2']);
    expect(removed.code, removed.err).to.equal(0);
    expect(removed.out).to.contain(
      'removed: tenant acme -> weight 1, maxSlots no cap, maxQueued 2000 (the defaults) (quota revision 3)',
    );
    expect(test.router.state.quotas.entries.has('acme')).to.equal(false);
  });

  it('refuses a stale --expect-revision, and bad weights and caps naming the field; nothing is appended', async () => {
    const before = test.router.state.quotas.revision;
    const stale = await quota([
      'set',
      '--tenant',
      'acme',
      '--weight',
      '3',
      '--expect-revision',
      '0',
    ]);
    expect(stale.code).to.equal(1);
    expect(stale.err).to.contain('FAILED_PRECONDITION');
    expect(stale.err).to.contain(`the quota table is at revision ${before}, not 0`);
    for (const [flag, value, field] of [
      // Every case is in the core's tests; here, that the router answers them over the wire.
      ['--weight', '-1', 'weight'],
      ['--max-slots', '0', 'maxSlots'],
    ] as const) {
      const bad = await quota(['set', '--tenant', 'acme', flag, value]);
      expect(bad.code, `${flag} ${value}`).to.equal(1);
      expect(bad.err).to.contain('INVALID_ARGUMENT');
      expect(bad.err).to.contain(`${field} must be`);
    }
    const words = await quota(['set', '--tenant', 'acme', '--weight', 'heavy']);
    expect(words.code).to.equal(2);
    expect(words.err).to.contain('--weight heavy: expected a number');
    const missing = await quota(['remove', '--tenant', 'nobody']);
    expect(missing.code).to.equal(1);
    expect(missing.err).to.contain('NOT_FOUND');
    expect(test.router.state.quotas.revision).to.equal(before);
  });

  it("keeps a quota for a tenant no credential names, warning with the tenants it knows; refuses a tenant's token", async () => {
    const typo = await quota(['set', '--tenant', 'acmee', '--max-slots', '3']);
    expect(typo.code, typo.err).to.equal(0);
    expect(typo.out).to.contain(
      'warning: no credential names tenant acmee; the quota is kept, but no call is of this tenant until the tokens file names it (tenants the router knows: acme, globex)',
    );
    const tenant = await quota(['status'], 'tenant.token');
    expect(tenant.code).to.equal(1);
    expect(tenant.err).to.contain('PERMISSION_DENIED');
  });

  it('--help tells the rules and the defaults', async () => {
    const child = runReadie(['quota', 'set', '--help']);
    await child.exited;
    const help = child.lines.join('\n');
    expect(help).to.contain('--max-slots <n|none>');
    expect(help).to.contain('--expect-revision <n>');
    const top = runReadie(['quota', '--help']);
    await top.exited;
    expect(top.lines.join('\n')).to.contain('slots held / weight');
  });
});
