/**
 * The Python packages (the client, the executor) have no import circles, lazy or type-only ones
 * included (lint/python-import-cycles.py, run by `npm run lint`); and the check finds one.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { PYTHON } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = join(ROOT, 'lint/python-import-cycles.py');

function check(...directories: string[]): { status: number | null; output: string } {
  const run = spawnSync(PYTHON, ['-B', SCRIPT, ...directories], { cwd: ROOT, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('python import circles (lint/python-import-cycles.py)', () => {
  after(() => cleanTempDirs());

  it('finds none in python/readie or the executor', () => {
    const { status, output } = check('python/readie', 'src/executor/readie_executor');
    expect(output).to.equal('');
    expect(status).to.equal(0);
  });

  it('names a circle drawn with a lazy import and one under TYPE_CHECKING', () => {
    const dir = join(tempDir(), 'pkg');
    mkdirSync(dir);
    writeFileSync(join(dir, '__init__.py'), 'from . import a, b, c\n');
    writeFileSync(join(dir, 'a.py'), 'def f():\n    from . import b\n');
    writeFileSync(join(dir, 'b.py'), 'from pkg.a import f\n');
    writeFileSync(
      join(dir, 'c.py'),
      'from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import Y\n',
    );
    writeFileSync(join(dir, 'd.py'), 'import pkg.c\nY = 1\n');
    // Imports of the package's public face, and of a module that imports nothing back, are fine.
    writeFileSync(join(dir, 'e.py'), 'import pkg\nfrom pkg.a import f\n');
    const { status, output } = check(dir);
    expect(status).to.equal(1);
    expect(output.trim().split('\n')).to.deep.equal([
      `${dir}: import circle: pkg.a -> pkg.b -> pkg.a`,
      `${dir}: import circle: pkg.c -> pkg.d -> pkg.c`,
    ]);
  });
});
