import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const TLS = join(ROOT, 'test', 'support', 'tls');

async function failedStart(
  args: readonly string[],
): Promise<{ code: number | null; stderr: string }> {
  const child = runReadie(['worker', ...args]);
  const { code } = await child.exited;
  return { code, stderr: child.stderr() };
}

function expectOneLine(result: { code: number | null; stderr: string }, pattern: RegExp): void {
  expect(result.code, result.stderr).to.equal(2);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).to.have.length(1);
  expect(lines[0])
    .to.match(/^readie worker: /)
    .and.match(pattern);
  expect(result.stderr).to.not.match(/\n\s+at |"stack"|"level"/);
}

describe('readie worker: start failures', function () {
  this.timeout(120_000);
  afterEach(cleanTempDirs);

  const base = (dir: string) => [
    '--router',
    '127.0.0.1:1',
    '--id',
    'wsf',
    '--flavor',
    'cpu',
    '--auth',
    'none',
    '--state-dir',
    join(dir, 'state'),
    '--python',
    PYTHON,
    '--restore-backend',
    'template',
  ];

  it("a key that is not the certificate's: exit 2, one line naming both files", async () => {
    const dir = tempDir();
    const otherKey = join(dir, 'other-key.pem');
    writeFileSync(
      otherKey,
      generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
        type: 'pkcs8',
        format: 'pem',
      }),
    );
    const result = await failedStart([
      ...base(dir),
      '--listen',
      '127.0.0.1:0',
      '--tls-ca',
      join(TLS, 'ca.pem'),
      '--tls-cert',
      join(TLS, 'server.pem'),
      '--tls-key',
      otherKey,
    ]);
    expectOneLine(result, /--tls-key .*other-key\.pem is not the key of --tls-cert .*server\.pem/);
  });

  it('a port in use: exit 2, one line saying so and which flag to change', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as { port: number };
    try {
      const result = await failedStart([
        ...base(tempDir()),
        '--insecure',
        '--listen',
        `127.0.0.1:${port}`,
      ]);
      expectOneLine(
        result,
        new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} .*in use.*--listen`),
      );
    } finally {
      blocker.close();
    }
  });

  it('a SIGTERM while it waits to retry the router: it stops there and exits 0', async () => {
    // Nothing listens at 127.0.0.1:1: each report is refused, and the worker waits 1 s, then 2 s,
    // then 4 s before the next (about 7 s in all before it would give up).
    const child = runReadie([
      'worker',
      ...base(tempDir()),
      '--insecure',
      '--listen',
      '127.0.0.1:0',
    ]);
    await child.waitFor(/router unreachable; retrying/, 60_000);
    child.process.kill('SIGTERM');
    const { code } = await child.exited;
    const log = child.lines.join('\n');
    expect(code, child.stderr()).to.equal(0);
    expect(child.stderr()).to.not.contain('could not start');
    expect(log).to.contain('stopped before it had started');
    // No attempt after the signal (the third would come 3 s after the first).
    expect(log).to.not.match(/"attempt":3/);
  });
});
