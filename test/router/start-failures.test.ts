import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open as openLmdb } from 'lmdb';
import { EventLog } from '../../src/events/index.js';
import { readLog, startTestRouter } from '../support/router/harness.js';
import { runReadie } from '../support/processes.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const TLS = join(ROOT, 'test', 'support', 'tls');

/** Runs `readie router ARGS` to its end; its exit code and stderr. */
async function failedStart(
  args: readonly string[],
): Promise<{ code: number | null; stderr: string }> {
  const child = runReadie(['router', ...args]);
  const { code } = await child.exited;
  return { code, stderr: child.stderr() };
}

/** What a failed start must look like: exit 2, one line on stderr, no stack, nothing on stdout. */
function expectOneLine(result: { code: number | null; stderr: string }, pattern: RegExp): void {
  expect(result.code, result.stderr).to.equal(2);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).to.have.length(1);
  expect(lines[0]).to.match(/^readie router: /);
  expect(lines[0]).to.match(pattern);
  expect(result.stderr).to.not.match(/\n\s+at |"stack"|"level"/);
}

describe('readie router: start failures', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('a second router on the same log: exit 2, names the holder and the fix, appends nothing', async () => {
    const test = await startTestRouter();
    try {
      const before = test.router.state;
      const result = await failedStart(
        [
          'router',
          '--insecure',
          '--auth',
          'none',
          '--log',
          test.logDir,
          '--listen',
          '127.0.0.1:0',
        ].slice(1),
      );
      expectOneLine(
        result,
        new RegExp(
          `being written by process ${process.pid}.*stop the other router, or give this one its own --log`,
        ),
      );
      expect(test.router.state.lastSeq).to.equal(before.lastSeq);
    } finally {
      await test.close();
    }
    expect(readLog(test.logDir).map((event) => event.type)).to.deep.equal(['RouterStarted']);
  });

  it('a port in use: exit 2, says so and which flag to change, appends nothing', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as { port: number };
    const logDir = join(tempDir(), 'log');
    try {
      const result = await failedStart([
        '--insecure',
        '--auth',
        'none',
        '--log',
        logDir,
        '--listen',
        `127.0.0.1:${port}`,
      ]);
      expectOneLine(
        result,
        new RegExp(
          `cannot listen on 127\\.0\\.0\\.1:${port}: the address is in use.*pass another --listen`,
        ),
      );
    } finally {
      blocker.close();
    }
    expect(existsSync(logDir) ? readLog(logDir) : []).to.deep.equal([]);
  });

  it("a key that is not the certificate's: exit 2, names both files, appends nothing", async () => {
    const dir = tempDir();
    const otherKey = join(dir, 'other-key.pem');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(otherKey, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const logDir = join(dir, 'log');
    const result = await failedStart([
      '--tls-cert',
      join(TLS, 'server.pem'),
      '--tls-key',
      otherKey,
      '--auth',
      'none',
      '--log',
      logDir,
      '--listen',
      '127.0.0.1:0',
    ]);
    expectOneLine(
      result,
      /--tls-key .*other-key\.pem is not the key of --tls-cert .*server\.pem .*pass the key made with that certificate/,
    );
    expect(existsSync(logDir) ? readLog(logDir) : []).to.deep.equal([]);
  });

  it('a --worker-ca without a certificate: exit 2, names the file', async () => {
    const dir = tempDir();
    const notCa = join(dir, 'ca.pem');
    writeFileSync(notCa, 'not a certificate\n');
    const result = await failedStart([
      '--insecure',
      '--auth',
      'none',
      '--log',
      join(dir, 'log'),
      '--worker-ca',
      notCa,
    ]);
    expectOneLine(result, /--worker-ca .*ca\.pem holds no PEM certificate/);
  });

  it('a duration without a unit: exit 2, naming the forms it takes', async () => {
    const dir = tempDir();
    const result = await failedStart([
      '--insecure',
      '--auth',
      'none',
      '--log',
      join(dir, 'log'),
      '--probe-interval',
      '5',
    ]);
    expectOneLine(
      result,
      /PROBE_INTERVAL: "5" has no unit: write 5s or 5ms \(durations take 500ms, 30s, 10m, 1h, 7d\)/,
    );
    const fromEnv = runReadie(
      ['router', '--insecure', '--auth', 'none', '--log', join(dir, 'log')],
      { WORKER_TTL: '30' },
    );
    const { code } = await fromEnv.exited;
    expect(code).to.equal(2);
    expect(fromEnv.stderr()).to.match(/WORKER_TTL: "30" has no unit/);
  });

  it('a log retention shorter than the snapshot spacing or a call: exit 2, naming both bounds', async () => {
    const result = await failedStart([
      '--insecure',
      '--auth',
      'none',
      '--log',
      join(tempDir(), 'log'),
      '--log-retention',
      '30m',
    ]);
    expectOneLine(
      result,
      /LOG_RETENTION 30m is shorter than what the live log must keep: the snapshot spacing \(SNAPSHOT_INTERVAL 1h\) and the longest call's lifetime \(EXECUTION_TIMEOUT 1h\); give LOG_RETENTION at least 1h/,
    );
  });

  it('a log with a hole in its tail: exit 2, naming the log, the missing seqs and what to do', async () => {
    // Given: a log of 10 events from which seqs 5 and 6 went missing (a lost commit).
    const dir = tempDir();
    const log = EventLog.open(dir);
    const leaving = (n: number) => ({ type: 'WorkerLeaving' as const, workerId: `w${n}` });
    await log.append(Array.from({ length: 10 }, (_, i) => leaving(i))).committed;
    await log.close();
    const raw = openLmdb({ path: join(dir, 'events.mdb'), maxDbs: 5 });
    const events = raw.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
    await events.remove(5);
    await events.remove(6);
    await raw.close();
    // When: a router starts on it.
    const result = await failedStart([
      '--insecure',
      '--auth',
      'none',
      '--log',
      dir,
      '--listen',
      '127.0.0.1:0',
    ]);
    // Then: one line names the log, the hole, and the way on.
    expectOneLine(result, new RegExp(`event log ${dir} has a hole: seqs 5 to 6 are missing`));
    expect(result.stderr).to.include('seq 4 is followed by 7');
    expect(result.stderr).to.include(`replay export ${dir} --to 4 -o kept.jsonl`);
    expect(result.stderr).to.include('restore');
  });
});
