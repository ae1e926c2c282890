import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** What the docs promise: `npx readie` in the checkout, and `readie` on the PATH after `npm install -g .`. */
describe('installing the readie command', function () {
  this.timeout(120_000);
  after(cleanTempDirs);

  it("npx readie runs the checkout's command", () => {
    const run = spawnSync('npx', ['--no-install', 'readie', '--help'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout)
      .to.match(/^Usage: readie /)
      .and.include('status')
      .and.include('certs');
  });

  it('npm install -g . puts readie and replay on the PATH, working from any directory', () => {
    const prefix = tempDir('readie-global-');
    const install = spawnSync(
      'npm',
      ['install', '-g', '.', '--prefix', prefix, '--no-audit', '--no-fund'],
      {
        cwd: ROOT,
        encoding: 'utf8',
      },
    );
    expect(install.status, install.stderr).to.equal(0);
    const env = { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env['PATH'] ?? ''}` };
    for (const command of ['readie', 'replay']) {
      const run = spawnSync(command, ['--help'], { cwd: prefix, env, encoding: 'utf8' });
      expect(run.status, `${command}: ${run.stderr}`).to.equal(0);
      expect(run.stdout).to.match(new RegExp(`^Usage: ${command} `));
    }
  });
});
