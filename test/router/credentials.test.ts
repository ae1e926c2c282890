import { expect } from 'chai';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ServiceError } from '@grpc/grpc-js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { createLogger, TokensFileError } from '../../src/router/index.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { checkHealth } from '../support/health-client.js';
import { captureLog } from '../support/log-capture.js';
import {
  bearer,
  codeOf,
  run,
  settledLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const ACME = 'acme-client-token-0123456789';
const GLOBEX = 'globex-client-token-0123456789';
const W1 = 'worker-one-token-0123456789';
const W2 = 'worker-two-token-0123456789';
const OPERATOR = 'operator-token-0123456789';
const ROUTER = 'router-own-token-0123456789';

/** A tokens file and a router token file in a fresh directory. */
function credentialFiles(lines: string): { tokensFile: string; routerTokenFile: string } {
  const dir = tempDir('readie-creds-');
  const tokensFile = join(dir, 'tokens');
  const routerTokenFile = join(dir, 'router.token');
  writeFileSync(tokensFile, lines, { mode: 0o600 });
  writeFileSync(routerTokenFile, `${ROUTER}\n`, { mode: 0o600 });
  return { tokensFile, routerTokenFile };
}

const TOKENS = [
  '# kind name token',
  `tenant acme ${ACME}`,
  `tenant globex ${tokenDigest(GLOBEX)}`,
  `worker w1 ${W1}`,
  `worker w2 ${tokenDigest(W2)}`,
  `operator alice ${OPERATOR}`,
  '',
].join('\n');

/** The gRPC error of a promise, or undefined when it resolved. */
function refusal(promise: Promise<unknown>): Promise<ServiceError | undefined> {
  return promise.then(
    () => undefined,
    (error: ServiceError) => error,
  );
}

describe('router: credentials name their holder', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let files: { tokensFile: string; routerTokenFile: string };
  let worker: ScriptedWorker;
  const log = captureLog();

  before(async () => {
    files = credentialFiles(TOKENS);
    test = await startTestRouter({
      auth: { mode: 'tokens', ...files },
      logger: createLogger('debug', log.stream),
    });
    // A worker that accepts the router's token alone, as real workers do.
    worker = await ScriptedWorker.start({ workerId: 'w1', requireToken: ROUTER });
    await worker.connect(test.address, { token: W1 }).reportStatus();
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it("logs the tenant its credential names on CallRequested and on every line of the call, and presents the router's own token to the worker", async () => {
    const outcome = await run(
      test.client,
      'echo hi',
      { requestId: 'r-acme', sessionId: 's-acme' },
      { metadata: bearer(ACME) },
    );
    expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
    const requested = (await settledLog(test)).find(
      (e) => e.type === 'CallRequested' && e.requestId === 'r-acme',
    );
    expect(requested).to.include({ tenantId: 'acme', sessionId: 's-acme' });
    const lines = log.lines().filter((line) => line.requestId === 'r-acme');
    expect(lines.map((line) => line.msg)).to.include.members(['call placed', 'call finished']);
    for (const line of lines) expect(line, String(line.msg)).to.include({ tenantId: 'acme' });
    // The worker got the router's credential, never the client's.
    expect(worker.calls.at(-1)?.metadata.get('authorization')).to.deep.equal([`Bearer ${ROUTER}`]);
    // A tenant listed by its digest authenticates with the token itself.
    const globex = await run(
      test.client,
      'echo',
      { requestId: 'r-globex' },
      { metadata: bearer(GLOBEX) },
    );
    expect(codeOf(globex)).to.equal('OK');
    expect(
      (await settledLog(test)).find(
        (e) => e.type === 'CallRequested' && e.requestId === 'r-globex',
      ),
    ).to.include({ tenantId: 'globex' });
    expect(log.text()).to.not.include(ACME).and.not.include(ROUTER).and.not.include(W1);
  });

  it('refuses an unknown or missing token with UNAUTHENTICATED, before anything is logged', async () => {
    const lastSeq = test.router.state.lastSeq;
    const missing = await run(test.client, 'echo');
    expect(codeOf(missing)).to.equal('UNAUTHENTICATED');
    expect(missing.error?.details).to.match(/missing bearer token/);
    const wrong = await run(
      test.client,
      'echo',
      {},
      { metadata: bearer('not-a-known-token-at-all') },
    );
    expect(codeOf(wrong)).to.equal('UNAUTHENTICATED');
    expect(test.router.state.lastSeq).to.equal(lastSeq);
  });

  it("refuses calls with a worker's, the operator's or the router's credential: PERMISSION_DENIED, nothing logged", async () => {
    const lastSeq = test.router.state.lastSeq;
    for (const [token, words] of [
      [W1, 'a worker credential (worker w1)'],
      [OPERATOR, 'an operator credential (alice)'],
      [ROUTER, "the router's own credential"],
    ] as const) {
      const outcome = await run(test.client, 'echo', {}, { metadata: bearer(token) });
      expect(codeOf(outcome), words).to.equal('PERMISSION_DENIED');
      expect(outcome.error?.details).to.include(`${words} may not call readie.v1.ProxyService`);
    }
    expect(test.router.state.lastSeq).to.equal(lastSeq);
  });

  it('refuses a report from a client token, the router token, or a worker reporting as another: PERMISSION_DENIED, nothing logged', async () => {
    const impostor = await ScriptedWorker.start({ workerId: 'w2' });
    try {
      const lastSeq = test.router.state.lastSeq;
      // A tenant's token, as a hostile tenant would try it.
      const asTenant = await refusal(
        impostor.connect(test.address, { token: ACME }).reportStatus(),
      );
      expect(asTenant?.code).to.equal(7);
      expect(asTenant?.details).to.include('a tenant credential (tenant acme) may not call');
      const asRouter = await refusal(
        impostor.connect(test.address, { token: ROUTER }).reportStatus(),
      );
      expect(asRouter?.code).to.equal(7);
      // w1's credential reporting as w2: every kind of report.
      impostor.connect(test.address, { token: W1 });
      for (const report of [
        impostor.reportStatus(),
        impostor.reportUtilization(),
        impostor.reportContainer('c-1', ContainerState.CONTAINER_STATE_READY),
      ]) {
        const error = await refusal(report);
        expect(error?.code).to.equal(7);
        expect(error?.details).to.include(
          'a worker credential (worker w1) may not report as worker "w2"',
        );
      }
      // Nothing at all reached the log.
      expect(test.router.state.lastSeq).to.equal(lastSeq);
      expect(test.router.state.workers.has('w2')).to.equal(false);
      // With its own credential, w2 registers.
      await impostor.connect(test.address, { token: W2 }).reportStatus();
      expect(test.router.state.workers.get('w2')?.status).to.equal('ready');
    } finally {
      await impostor.reportStatus({ status: 3 }).catch(() => undefined);
      impostor.stop();
    }
  });

  it('reloads the tokens file: new holders count at once, removed ones are refused, a bad file changes nothing', async () => {
    const ROTATED = 'acme-rotated-token-0123456789';
    writeFileSync(
      files.tokensFile,
      TOKENS.replace(`tenant acme ${ACME}`, `tenant acme-renamed ${ACME}\ntenant acme ${ROTATED}`),
    );
    const summary = test.router.reloadCredentials();
    expect(summary.credentials).to.deep.equal({ tenant: 3, worker: 2, operator: 1 });
    await run(test.client, 'echo', { requestId: 'r-after-reload' }, { metadata: bearer(ACME) });
    await run(test.client, 'echo', { requestId: 'r-rotated' }, { metadata: bearer(ROTATED) });
    const requests = (await settledLog(test)).filter((e) => e.type === 'CallRequested');
    expect(requests.find((e) => e.requestId === 'r-after-reload')).to.include({
      tenantId: 'acme-renamed',
    });
    expect(requests.find((e) => e.requestId === 'r-rotated')).to.include({ tenantId: 'acme' });

    writeFileSync(files.tokensFile, TOKENS.replace(`tenant acme ${ACME}\n`, ''));
    test.router.reloadCredentials();
    expect(codeOf(await run(test.client, 'echo', {}, { metadata: bearer(ACME) }))).to.equal(
      'UNAUTHENTICATED',
    );

    // A file with a mistake is refused, naming the line, and the credentials in force stay.
    writeFileSync(files.tokensFile, `${TOKENS}tenant acme short\n`);
    expect(() => test.router.reloadCredentials()).to.throw(
      TokensFileError,
      /line 7: a token has at least 16 characters/,
    );
    expect(codeOf(await run(test.client, 'echo', {}, { metadata: bearer(GLOBEX) }))).to.equal('OK');
    writeFileSync(files.tokensFile, TOKENS);
    test.router.reloadCredentials();
  });

  it('keeps its health service open to anyone', async () => {
    const answer = await checkHealth(test.address);
    expect(answer).to.equal('SERVING');
  });
});

describe('router: the tokens file', () => {
  afterEach(cleanTempDirs);

  async function startWith(lines: string): Promise<unknown> {
    return startTestRouter({ auth: { mode: 'tokens', ...credentialFiles(lines) } }).then(
      async (test) => {
        await test.close();
        return undefined;
      },
      (error: unknown) => error,
    );
  }

  it('refuses a file it cannot use, naming the line and never the token', async () => {
    const cases: [string, RegExp][] = [
      [`tenant acme ${ACME} extra`, /line 1: expected "KIND NAME TOKEN" \(3 fields\), got 4/],
      [`admin root ${ACME}`, /line 1: kind "admin" is not one of tenant, worker, operator/],
      [`worker w/1 ${W1}`, /line 1: worker ID "w\/1" must be/],
      [`tenant acme ${ACME}\nworker w1 ${ACME}`, /line 2: the same token as line 1/],
      [`tenant acme sha256:1234`, /line 1: a digest is "sha256:" and 64 hex digits/],
      [`worker w1 ${ROUTER}`, /line 1: this is the router's own token/],
    ];
    for (const [lines, message] of cases) {
      const error = await startWith(lines);
      expect(error, lines).to.be.instanceOf(TokensFileError);
      expect((error as Error).message).to.match(message);
      expect((error as Error).message).to.not.include(ACME);
    }
  });

  it('warns when the tokens file is readable by others', async () => {
    const log = captureLog();
    const files = credentialFiles(TOKENS);
    chmodSync(files.tokensFile, 0o644);
    const test = await startTestRouter({
      auth: { mode: 'tokens', ...files },
      logger: createLogger('warn', log.stream),
    });
    await test.close();
    expect(log.lines().map((line) => line.msg)).to.include(
      `--tokens-file ${files.tokensFile} is mode 0644: make it 0600 (chmod 600), readable by the router's user alone`,
    );
  });
});
