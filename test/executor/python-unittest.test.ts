import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { PYTHON } from '../support/python.js';

describe('the Python executor (unittest)', function () {
  this.timeout(120_000);

  it("passes its stdlib unittest suite under Debian's python3", () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const run = spawnSync(
      PYTHON,
      [
        '-B',
        '-m',
        'unittest',
        'discover',
        '-s',
        'test/executor',
        '-t',
        'test/executor',
        '-p',
        'test_*.py',
      ],
      {
        cwd: root,
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          PYTHONPATH: 'src/executor',
          PYTHONDONTWRITEBYTECODE: '1',
          LANG: 'C.UTF-8',
        },
        encoding: 'utf8',
      },
    );
    const report = `${run.stdout}${run.stderr}`;
    expect(run.status, report).to.equal(0);
    expect(report).to.match(/^OK/m);
    const ran = /Ran (\d+) tests?/.exec(report);
    expect(Number(ran?.[1] ?? 0)).to.be.greaterThan(20);
  });
});
