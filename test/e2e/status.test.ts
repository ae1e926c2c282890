import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeLocalCredentials } from '../../src/cluster/local-credentials.js';
import { freePort } from '../support/e2e-cluster.js';
import { runReadie, type Child } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** `readie status ARGS` to its end: exit code, stdout, stderr. */
async function status(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runReadie(['status', ...args], env);
  const { code } = await child.exited;
  return { code, stdout: child.lines.join('\n'), stderr: child.stderr() };
}

interface WorkerJson {
  workerId: string;
  status: string;
  reason: string;
  probeFailures: number;
  lastProbeProblem: string;
  address: string;
}

async function statusJson(
  router: string,
  tokenFile: string,
): Promise<{ workers: WorkerJson[]; lastSeq: number }> {
  const answer = await status([
    '--router',
    router,
    '--insecure',
    '--token-file',
    tokenFile,
    '--json',
  ]);
  expect(answer.code, answer.stderr).to.equal(0);
  return JSON.parse(answer.stdout) as { workers: WorkerJson[]; lastSeq: number };
}

async function until<T>(
  read: () => Promise<T>,
  holds: (value: T) => boolean,
  what: string,
): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await read();
    if (holds(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('readie status against a real cluster', function () {
  this.timeout(180_000);
  let router: Child | undefined;
  let worker: Child | undefined;
  after(() => {
    worker?.process.kill('SIGKILL');
    router?.process.kill('SIGKILL');
    cleanTempDirs();
  });

  it('shows the workers live; a killed worker shows its probe failures, then its eviction', async () => {
    const dir = tempDir('readie-status-');
    const credentials = writeLocalCredentials(dir, ['st-w1']);
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    router = runReadie([
      'router',
      '--insecure',
      '--listen',
      address,
      '--log',
      join(dir, 'log'),
      '--tokens-file',
      credentials.tokensFile,
      '--router-token-file',
      credentials.routerTokenFile,
      '--probe-interval',
      '1s',
      '--probe-timeout',
      '300ms',
      '--probe-failure-threshold',
      '6',
      '--reaper-interval',
      '1s',
      '--worker-ttl',
      '1h',
    ]);
    await router.waitFor(/router serving/, 30_000);
    worker = runReadie([
      'worker',
      '--router',
      address,
      '--listen',
      '127.0.0.1:0',
      '--id',
      'st-w1',
      '--flavor',
      'cpu',
      '--state-dir',
      join(dir, 'w1'),
      '--python',
      PYTHON,
      '--insecure',
      '--restore-backend',
      'template',
      '--memory',
      '2GiB',
      '--standby',
      '0',
      '--token-file',
      credentials.workerTokenFiles.get('st-w1') ?? '',
      '--router-token-file',
      credentials.routerDigestFile,
    ]);
    const ready = await until(
      () => statusJson(address, credentials.operatorTokenFile),
      (answer) => answer.workers.some((w) => w.workerId === 'st-w1' && w.status === 'ready'),
      'the worker to register',
    );
    expect(Number(ready.lastSeq)).to.be.greaterThan(0);

    const page = await status([
      '--router',
      address,
      '--insecure',
      '--token-file',
      credentials.operatorTokenFile,
    ]);
    expect(page.code, page.stderr).to.equal(0);
    expect(page.stdout).to.match(/^Router\nversion /);
    expect(page.stdout).to.include('Workers').and.include('st-w1').and.include('ready');
    expect(page.stdout).to.match(/log seq \d+/);

    // The shell npm start's exports were pasted in: the tenant's READIE_AUTH_TOKEN is never sent;
    // the operator token comes from the local cluster's state directory.
    const exported = {
      READIE_ADDRESS: `127.0.0.1:${await freePort()},${address}`,
      READIE_INSECURE: '1',
    };
    const tenantEnv = { ...exported, READIE_AUTH_TOKEN: credentials.clientToken };
    const local = await status(['--state-dir', dir], tenantEnv);
    expect(local.code, local.stderr).to.equal(0);
    expect(local.stdout).to.include('st-w1');
    // The first listed address is dead: the page says so and comes from the one that answers.
    expect(local.stdout).to.match(
      /^Routers\n127\.0\.0\.1:\d+ +not answering \(UNAVAILABLE: nothing listens at/,
    );
    expect(local.stdout).to.match(new RegExp(`^${address} +leads$`, 'm'));
    expect(local.stderr).to.not.include('DeprecationWarning');
    const pinned = runReadie(['pin', 'status', '--state-dir', dir], tenantEnv);
    expect((await pinned.exited).code, pinned.stderr()).to.equal(0);
    expect(pinned.lines.join('\n')).to.match(/^routing revision 0/);
    // READIE_OPERATOR_TOKEN, where no local cluster is.
    const elsewhere = tempDir('readie-status-none-');
    const variable = await status(['--state-dir', elsewhere], {
      ...tenantEnv,
      READIE_OPERATOR_TOKEN: credentials.operatorToken,
    });
    expect(variable.code, variable.stderr).to.equal(0);
    // No operator credential anywhere: nothing is sent, and the message says why the tenant's is not.
    for (const command of [['status'], ['pin', 'status']]) {
      const child = runReadie(
        [...command, '--router', address, '--state-dir', elsewhere],
        tenantEnv,
      );
      expect((await child.exited).code).to.equal(1);
      expect(child.stderr()).to.match(
        new RegExp(
          `^readie ${command[0]}: the router at ${address} refused the credential \\(UNAUTHENTICATED: .*needs an operator token: --token-file FILE or READIE_OPERATOR_TOKEN .*READIE_AUTH_TOKEN is a tenant token`,
        ),
      );
    }
    // A tenant's token given as the operator's is PERMISSION_DENIED, said in one line, exit 1,
    // pointing at the local cluster's operator token when there is one.
    writeFileSync(join(dir, 'tenant.token'), `${credentials.clientToken}\n`, { mode: 0o600 });
    const tenant = await status(
      ['--router', address, '--state-dir', dir, '--token-file', join(dir, 'tenant.token')],
      exported,
    );
    expect(tenant.code).to.equal(1);
    expect(tenant.stderr).to.match(/^readie status: .*PERMISSION_DENIED.*needs an operator token/);
    expect(tenant.stderr).to.include(`--token-file ${credentials.operatorTokenFile})`);
    // TLS spoken to the plaintext router: the pin command names the mismatch, as status does, and
    // Node's warning about an IP as the TLS server name (DEP0123) stays off stderr.
    for (const command of [['status'], ['pin', 'status']]) {
      const child = runReadie([...command, '--router', address, '--state-dir', dir], {
        READIE_INSECURE: '0',
      });
      expect((await child.exited).code).to.equal(1);
      expect(child.stderr()).to.include(
        `the router (or nginx) at ${address} speaks plaintext but this client speaks TLS`,
      );
      expect(child.stderr()).to.not.include('DEP0123');
    }

    worker.process.kill('SIGKILL');
    const failing = await until(
      () => statusJson(address, credentials.operatorTokenFile),
      (answer) => (answer.workers.find((w) => w.workerId === 'st-w1')?.probeFailures ?? 0) >= 1,
      'a failed probe',
    );
    const probed = failing.workers.find((w) => w.workerId === 'st-w1')!;
    expect(probed.status).to.equal('ready');
    // The first probe after the kill finds nothing listening, or (its connection still open when
    // the worker died) the connection reset: either names the worker's address and what happened.
    const problem = probed.lastProbeProblem;
    const refused = `nothing listens at ${probed.address}`;
    const reset = `the connection to worker st-w1 at ${probed.address} was lost`;
    expect(problem.includes(refused) || problem.includes(reset), problem).to.equal(true);
    const evicted = await until(
      () => statusJson(address, credentials.operatorTokenFile),
      (answer) => answer.workers.find((w) => w.workerId === 'st-w1')?.status === 'evicted',
      'the eviction',
    );
    expect(evicted.workers.find((w) => w.workerId === 'st-w1')?.reason).to.equal('probe');
  });

  it('refuses a bad --interval with the forms it takes (exit 2)', async () => {
    const answer = await status([
      '--router',
      '127.0.0.1:1',
      '--insecure',
      '--watch',
      '--interval',
      '2',
    ]);
    expect(answer.code).to.equal(2);
    expect(answer.stderr).to.match(/^readie status: "2" has no unit/);
  });
});
