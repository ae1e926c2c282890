import { expect } from 'chai';
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

    // A tenant's token may not read the status: PERMISSION_DENIED, said in one line, exit 1.
    const tenant = await status(['--router', address, '--insecure'], {
      READIE_AUTH_TOKEN: credentials.clientToken,
    });
    expect(tenant.code).to.equal(1);
    expect(tenant.stderr).to.match(/^readie status: .*PERMISSION_DENIED.*needs an operator token/);
    // With the local cluster's state directory named, it points at that cluster's operator token.
    const local = await status(['--router', address, '--insecure', '--state-dir', dir], {
      READIE_AUTH_TOKEN: credentials.clientToken,
    });
    expect(local.code).to.equal(1);
    expect(local.stderr).to.include(`--token-file ${credentials.operatorTokenFile})`);

    worker.process.kill('SIGKILL');
    const failing = await until(
      () => statusJson(address, credentials.operatorTokenFile),
      (answer) => (answer.workers.find((w) => w.workerId === 'st-w1')?.probeFailures ?? 0) >= 1,
      'a failed probe',
    );
    const probed = failing.workers.find((w) => w.workerId === 'st-w1')!;
    expect(probed.status).to.equal('ready');
    expect(probed.lastProbeProblem).to.include(`nothing listens at ${probed.address}`);
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
