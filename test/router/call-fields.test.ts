import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClusterEvent } from '../../src/events/index.js';
import type { CallConfig } from '../../src/proto/gen/readie/v1/proxy.js';
import { TenantServiceClient } from '../../src/proto/gen/readie/v1/tenant.js';
import { codeName } from '../../src/router/grpc-status.js';
import { InvalidRequestError, ReadieClient } from '../../src/client/index.js';
import {
  bearer,
  codeOf,
  eventually,
  readLog,
  run,
  settledLog,
  startTestRouter,
  type CallOutcome,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { PYTHON } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));

const TENANT_A = 'tenant-a-token-0123456789abcdef';
const TENANT_B = 'tenant-b-token-0123456789abcdef';
const W1 = 'worker-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';

/** The bytes the log's events take as JSONL (the interchange format: one event a line). */
function bytesOf(events: readonly ClusterEvent[]): number {
  return events.reduce((sum, event) => sum + JSON.stringify(event).length + 1, 0);
}

describe("router: what a call's config may carry (IDs, import hints, package entries)", function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    const dir = tempDir('readie-call-fields-');
    writeFileSync(
      join(dir, 'tokens'),
      `tenant tenant-a ${TENANT_A}\ntenant tenant-b ${TENANT_B}\nworker w1 ${W1}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
    });
    worker = await ScriptedWorker.start({ workerId: 'w1', requireToken: ROUTER });
    await worker.connect(test.address, { token: W1 }).reportStatus();
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  /** The log's JSONL bytes once every event the router appended is on disk. */
  async function logBytes(): Promise<number> {
    return bytesOf(await settledLog(test));
  }

  const call = (fields: Partial<CallConfig>, token = TENANT_A): Promise<CallOutcome> =>
    run(test.client, 'echo hi', fields, { metadata: bearer(token) });

  /** Runs a call that must be refused before anything is logged; its status details. */
  async function refused(fields: Partial<CallConfig>): Promise<string> {
    const before = await logBytes();
    const outcome = await call(fields);
    expect(codeOf(outcome), outcome.error?.details).to.equal('INVALID_ARGUMENT');
    expect(await logBytes()).to.equal(before, 'a refused config is not logged');
    return outcome.error?.details ?? '';
  }

  it('refuses a newline in a request ID as INVALID_ARGUMENT naming request_id (not INTERNAL)', async () => {
    const details = await refused({ requestId: 'req-1\nFAKE LOG LINE' });
    expect(details).to.match(/^request_id holds U\+000A at character 6: an ID holds only/);
    expect(details).to.not.include('FAKE');
  });

  it('refuses escapes and controls in session, retry and checkpoint IDs, naming the field', async () => {
    expect(await refused({ sessionId: 'ses-\x1b]0;pwned\x07' })).to.match(
      /^session_id holds U\+001B/,
    );
    expect(await refused({ retryOf: 'req-\x1b[2J' })).to.match(/^retry_of holds U\+001B/);
    expect(await refused({ checkpointId: 'ckpt\u202e' })).to.match(/^checkpoint_id holds U\+202E/);
    expect(await refused({ requestId: 'r'.repeat(257) })).to.match(
      /^request_id is 257 characters long: an ID has at most 256/,
    );
  });

  it('refuses 64 KiB of import hints naming imports and its bound, adding nothing to the log', async () => {
    const many = Array.from({ length: 1024 }, (_, i) => `module_${String(i).padStart(57, '0')}`);
    expect(many.join('').length).to.equal(64 * 1024);
    expect(await refused({ imports: many })).to.equal(
      'imports carries 1024 import hints: a call carries at most 64',
    );
    expect(await refused({ imports: ['x'.repeat(64 * 1024)] })).to.equal(
      'imports[0] is 65536 characters long: an import hint has at most 128',
    );
    expect(await refused({ imports: ['numpy', '\x1b[31mred'] })).to.match(
      /^imports\[1\] is not a module name/,
    );
  });

  it('refuses too many, too long or unprintable package entries, naming the field and the bound', async () => {
    const packages = Array.from({ length: 65 }, (_, i) => `pkg${i}`);
    expect(await refused({ packages })).to.equal(
      'packages carries 65 entries: a call carries at most 64',
    );
    expect(await refused({ packages: [`numpy==${'1'.repeat(300)}`] })).to.equal(
      'packages[0] is 307 characters long: a package entry has at most 256',
    );
    expect(await refused({ packages: ['numpy\n'] })).to.match(/^packages\[0\] holds U\+000A/);
  });

  it('refuses an image whose requirements, imports or environment are outside their bounds, naming the field', async () => {
    const image = (fields: Partial<NonNullable<CallConfig['image']>>) => ({
      image: { packages: [], imports: [], env: {}, ...fields },
    });
    expect(await refused(image({ packages: ['tomli\n'] }))).to.match(
      /^image\.packages\[0\] holds U\+000A/,
    );
    expect(await refused(image({ imports: ['not a module'] }))).to.match(
      /^image\.imports\[0\] is not a module name/,
    );
    expect(await refused(image({ env: { PATH: '/evil' } }))).to.match(
      /^image\.env may not set PATH/,
    );
    expect(await refused(image({ env: { 'A B': 'x' } }))).to.match(/^image\.env holds a name/);
    expect(await refused(image({ env: { MODE: '\x1b[2J' } }))).to.match(
      /^image\.env\.MODE is not a value/,
    );
  });

  it('refuses a pinned call that names an image before anything is logged (its worker would refuse it after placement)', async () => {
    const image = { packages: ['tomli-w'], imports: ['tomli_w'], env: {} };
    expect(await refused({ pinned: true, image })).to.equal(
      "image: a pinned call runs in its tenant's version and cannot also name an image",
    );
    // An empty image is no image: the pinned call goes on to its placement (tenant-a pinned no
    // version, so placement refuses it).
    const empty = await call({ pinned: true, image: { packages: [], imports: [], env: {} } });
    expect(codeOf(empty), empty.error?.details).to.equal('FAILED_PRECONDITION');
    expect(empty.error?.details).to.match(/pin/);
  });

  it('refuses a python_version that is not a version', async () => {
    expect(await refused({ pythonVersion: '3.11\x1b[0m' })).to.match(/^python_version/);
  });

  it('refuses a batch of more than 1,024 inputs or more than 256 at once, naming the field', async () => {
    expect(await refused({ inputs: 1025 })).to.equal(
      'inputs is 1025: a batch carries at most 1024 inputs',
    );
    expect(await refused({ inputs: 8, maxInputs: 257 })).to.equal(
      'max_inputs is 257: a container runs at most 256 inputs at once',
    );
  });

  it('logs a batch as one call with its input count, and tells the worker the count', async () => {
    const requestId = 'req-batch-of-1024';
    expect(codeOf(await call({ requestId: 'req-plain-beside-a-batch' }))).to.equal('OK');
    const outcome = await call({ requestId, inputs: 1024, maxInputs: 256 });
    expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
    const header = worker.calls.find((c) => c.header.ids?.requestId === requestId)?.header;
    expect(header?.inputs).to.equal(1024);
    expect(header?.maxInputs).to.equal(256);
    await eventually(
      () =>
        readLog(test.logDir).some((e) => e.type === 'CallFinished' && e.requestId === requestId),
      'the batch to finish in the log',
    );
    const requested = readLog(test.logDir).filter(
      (e): e is Extract<ClusterEvent, { type: 'CallRequested' }> => e.type === 'CallRequested',
    );
    expect(requested.find((e) => e.requestId === requestId)?.inputs).to.equal(1024);
    // A plain call records none (null), and its header carries none.
    const plain = requested.find((e) => e.requestId === 'req-plain-beside-a-batch');
    expect(plain?.inputs).to.equal(null);
    const plainHeader = worker.calls.find(
      (c) => c.header.ids?.requestId === 'req-plain-beside-a-batch',
    )?.header;
    expect(plainHeader?.inputs).to.equal(undefined);
  });

  it('serves a call at the bounds, and what it logs stays bounded', async () => {
    const imports = Array.from({ length: 64 }, (_, i) => `m${String(i).padStart(127, '0')}`);
    const before = await logBytes();
    const outcome = await call({
      imports,
      requestId: `req-${'a'.repeat(252)}`,
      sessionId: `ses-${'b'.repeat(252)}`,
    });
    expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
    // The whole call's story (requested, placed, bound, pinned, finished) with 8 KiB of hints and IDs at their bound.
    expect((await logBytes()) - before).to.be.below(16 * 1024);
  });

  it('refuses an EndSession whose session ID holds a newline, naming session_id', async () => {
    const tenant = new TenantServiceClient(test.address, credentials.createInsecure());
    try {
      const error = await new Promise<{ code: number; details: string } | null>((resolve) =>
        tenant.endSession({ sessionId: 'ses-1\nx' }, bearer(TENANT_B), (e) => resolve(e)),
      );
      expect(error && codeName(error.code)).to.equal('INVALID_ARGUMENT');
      expect(error?.details).to.match(/^session_id holds U\+000A at character 6/);
    } finally {
      tenant.close();
    }
  });
  it('the TypeScript client rejects with InvalidRequestError naming the field and the bound', async () => {
    const client = new ReadieClient({ address: test.address, insecure: true, token: TENANT_A });
    try {
      const hints = Array.from({ length: 65 }, (_, i) => `m${i}`);
      const tooMany = await client
        .call({ module: 'math', function: 'hypot', args: [3, 4] }, { imports: hints })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(tooMany).to.be.instanceOf(InvalidRequestError);
      expect((tooMany as InvalidRequestError).message).to.include(
        'imports carries 65 import hints: a call carries at most 64',
      );
      const badSession = await client
        .session('ses-1\n')
        .call({ module: 'math', function: 'hypot', args: [3, 4] })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(badSession).to.be.instanceOf(InvalidRequestError);
      expect((badSession as InvalidRequestError).message).to.include(
        'session_id holds U+000A at character 6',
      );
    } finally {
      client.close();
    }
  });

  it('the Python client raises InvalidRequestError naming the field and the bound', async () => {
    const script = [
      'import readie',
      '@readie.remote(imports=["m%d" % i for i in range(70)])',
      'def f():',
      '    return 1',
      'try:',
      '    f()',
      'except readie.InvalidRequestError as error:',
      '    print(type(error).__name__, error)',
      '@readie.remote(packages=["numpy" + "1" * 300])',
      'def g():',
      '    return 1',
      'try:',
      '    g()',
      'except readie.InvalidRequestError as error:',
      '    print(type(error).__name__, error)',
    ].join('\n');
    const output = await new Promise<string>((resolve, reject) =>
      execFile(
        PYTHON,
        ['-c', script],
        {
          env: {
            PATH: process.env.PATH,
            PYTHONPATH: PYTHON_ROOT,
            READIE_ADDRESS: test.address,
            READIE_INSECURE: '1',
            READIE_AUTH_TOKEN: TENANT_A,
          },
        },
        (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout)),
      ),
    );
    const [imports, packages] = output.trim().split('\n');
    expect(imports).to.match(
      /^InvalidRequestError .*imports carries 70 import hints: a call carries at most 64/,
    );
    expect(packages).to.match(
      /^InvalidRequestError .*packages\[0\] is 305 characters long: a package entry has at most 256/,
    );
  });
});
