import { expect } from 'chai';
import { execSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { checkHost, describeMissing } from '../../src/cluster/prerequisites.js';
import { freePort } from '../support/e2e-cluster.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('the local cluster (readie up, what npm start runs)', function () {
  this.timeout(180_000);
  afterEach(cleanTempDirs);

  it('starts a router and two workers, prints the environment and an example command that works as printed, and stops cleanly on Ctrl-C', async () => {
    const stateDir = tempDir('readie-up-');
    const port = await freePort();
    const up = runReadie(['up', '--state-dir', stateDir, '--port', String(port)]);
    await up.waitFor(/^readie: Ctrl-C stops the cluster\.$/, 120_000);
    const exports = Object.fromEntries(
      up.lines
        .filter((line) => line.startsWith('export '))
        .map((line) => /^export ([A-Z_]+)=(.*)$/.exec(line)!.slice(1, 3) as [string, string]),
    );
    expect(exports).to.have.keys('READIE_ADDRESS', 'READIE_INSECURE', 'PYTHONPATH');
    expect(exports.READIE_ADDRESS).to.equal(`127.0.0.1:${port}`);
    const command = up.lines[up.lines.indexOf('# Then run an example:') + 1]!;
    expect(command).to.match(/^\/usr\/bin\/python3 \/.*\/examples\/hello\.py$/);
    // Exactly what a user does: paste the export lines, run the command.
    const shell = `${up.lines.filter((line) => line.startsWith('export ')).join('\n')}\n${command}\n`;
    const example = spawnSync('bash', ['-c', shell], {
      cwd: tempDir(),
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '' },
      timeout: 120_000,
    });
    expect(example.status, example.stderr).to.equal(0);
    expect(example.stdout).to.contain('add(2, 3) = 5');
    expect(example.stdout).to.contain('a session keeps its Python state: [1, 2, 3]');
    expect(example.stdout).to.contain('remote error: ZeroDivisionError - division by zero');
    up.process.kill('SIGINT');
    const [code] = (await once(up.process, 'exit')) as [number | null];
    expect(code).to.equal(0);
    expect(up.lines.at(-1)).to.equal('readie: stopped; the event log is flushed.');
    // Nothing left running, and the log replays.
    expect(
      execSync(`ps -eo args | grep -c "[b]in/readie.js .*${stateDir}" || true`).toString().trim(),
    ).to.equal('0');
    const verify = spawnSync(
      process.execPath,
      [join(process.cwd(), 'bin', 'replay.js'), 'verify', join(stateDir, 'log')],
      { encoding: 'utf8' },
    );
    expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
    expect(verify.stdout).to.match(/^verified: \d+ recorded decisions reproduced exactly/);
  });

  it('names what the host lacks and the one command that installs it', () => {
    const nothing = checkHost('/nonexistent/python3');
    expect(describeMissing(nothing.missing)).to.contain('apt-get install -y python3');
    // A Python without its site packages lacks every Debian package the cluster needs.
    const bare = join(tempDir(), 'python3');
    writeFileSync(bare, `#!/bin/sh\nexec ${PYTHON} -S "$@"\n`, { mode: 0o755 });
    const message = describeMissing(checkHost(bare).missing);
    for (const module of ['cloudpickle', 'grpc', 'google.protobuf']) {
      expect(message).to.contain(`Python module ${module} for ${bare}`);
    }
    expect(message).to.contain(
      'apt-get update && apt-get install -y python3-cloudpickle python3-grpcio python3-protobuf',
    );
    expect(checkHost(PYTHON).missing).to.deep.equal([]);
  });
});
