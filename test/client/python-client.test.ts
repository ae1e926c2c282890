/**
 * The Python client's own suite (python/tests, stdlib unittest) run with Debian's Python, so that
 * `npm test` stays the one command. The suite starts real gRPC servers on loopback.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { PYTHON } from '../support/python.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));

interface Outcome {
  readonly code: number | null;
  readonly output: string;
}

function runUnittest(): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, ['-m', 'unittest', 'discover', '-s', 'tests', '-t', 'tests'], {
      cwd: PYTHON_ROOT,
      env: { ...process.env, PYTHONPATH: PYTHON_ROOT, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('python client (python/tests, unittest)', function () {
  this.timeout(300_000);

  it('passes its unittest suite', async () => {
    const { code, output } = await runUnittest();
    if (code !== 0) console.error(output);
    expect(code, `${PYTHON} -m unittest failed:\n${output}`).to.equal(0);
    const ran = /Ran (\d+) tests?/.exec(output);
    expect(Number(ran?.[1] ?? 0), output).to.be.greaterThan(0);
  });
});
