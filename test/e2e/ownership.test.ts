import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import {
  TenantServiceClient,
  type EndSessionResponse,
} from '../../src/proto/gen/readie/v1/tenant.js';
import { createLogger } from '../../src/router/index.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { captureLog } from '../support/log-capture.js';
import {
  bearer,
  callConfig,
  chunk,
  codeOf,
  configMessage,
  exchange,
  foldLog,
  readLog,
  settledLog,
  startTestRouter,
  type CallOutcome,
  type TestRouter,
} from '../support/router/harness.js';
import type { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { jsonCall, startHarness, type Harness } from '../support/worker-harness.js';

const TENANT_A = 'tenant-a-token-for-ownership-0123456789';
const TENANT_B = 'tenant-b-token-for-ownership-0123456789';
const WORKER = 'worker-token-for-ownership-0123456789';
const ROUTER = 'router-token-for-ownership-0123456789';

/** Python run in the sandbox: keep a secret in the interpreter, read it, or take a while. */
const PUT = jsonCall('def put(s):\n    global SECRET\n    SECRET = s\n    return "kept"\n', 'put', [
  'a-secret',
]);
const GET = jsonCall('def get():\n    return SECRET\n', 'get');
const SLOW = jsonCall('import time\ndef slow():\n    time.sleep(1.5)\n    return "slow"\n', 'slow');
const QUICK = jsonCall('def quick():\n    return 1\n', 'quick');

/** A file holding `text`, 0600, in `dir`. */
function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

/** The value a json-call answered. */
function valueOf(outcome: CallOutcome): unknown {
  expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
  return (JSON.parse(outcome.payload) as { value?: unknown }).value;
}

describe("two tenants on a real router and worker: neither can use the other's sessions or request IDs", function () {
  this.timeout(120_000);
  let test: TestRouter;
  let harness: Harness;
  let tenant: TenantServiceClient;
  const log = captureLog();

  before(async () => {
    const dir = tempDir('readie-ownership-');
    test = await startTestRouter({
      logger: createLogger('info', log.stream),
      auth: {
        mode: 'tokens',
        tokensFile: secret(
          dir,
          'tokens',
          `tenant tenant-a ${TENANT_A}\ntenant tenant-b ${TENANT_B}\nworker own-w1 ${WORKER}`,
        ),
        routerTokenFile: secret(dir, 'router.token', ROUTER),
      },
    });
    harness = await startHarness({
      router: { address: test.address } as ScriptedRouter,
      flags: {
        id: 'own-w1',
        auth: 'tokens',
        tokenFile: secret(dir, 'worker.token', WORKER),
        routerTokenFile: secret(dir, 'router.sha256', tokenDigest(ROUTER)),
      },
    });
    tenant = new TenantServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    tenant.close();
    await harness.stop();
    await test.close();
    cleanTempDirs();
  });

  /** A call of the tenant holding `token`: `payload`, with these config fields. */
  function call(
    token: string,
    payload: Buffer,
    fields: { requestId?: string; sessionId?: string; retryOf?: string } = {},
  ): Promise<CallOutcome> {
    return exchange(test.client, [configMessage(callConfig(fields)), chunk(payload)], {
      metadata: bearer(token),
    });
  }

  function end(sessionId: string, token: string): Promise<EndSessionResponse> {
    return new Promise((resolve, reject) =>
      tenant.endSession({ sessionId }, bearer(token), (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  const warnings = (words: string) =>
    log.lines().filter((line) => typeof line.msg === 'string' && line.msg.includes(words));

  it("refuses B's calls and end in A's session as a session B does not have: A's state stays A's", async () => {
    const session = 'sess-of-tenant-a-3f1c9a7e';
    expect(valueOf(await call(TENANT_A, PUT, { sessionId: session }))).to.equal('kept');

    // B names A's session: NOT_FOUND in words that name nothing of A's, and A's secret stays put.
    const stolen = await call(TENANT_B, GET, { sessionId: session });
    expect(codeOf(stolen)).to.equal('NOT_FOUND');
    expect(stolen.error?.details).to.equal(
      `session not found: this caller has no session ${session}; start a new session (a new session ID)`,
    );
    expect(stolen.payload).to.equal('');

    // B's end of it is answered exactly as the end of a session nobody ever used.
    const foreignEnd = await end(session, TENANT_B);
    expect(foreignEnd).to.deep.equal(await end('sess-nobody-ever-used-9d2e', TENANT_B));
    expect(foreignEnd).to.deep.equal({
      ended: false,
      workerId: '',
      containerId: '',
      containerRemoved: false,
    });
    expect(readLog(test.logDir).some((e) => e.type === 'SessionEnded')).to.equal(false);

    // A's session is whole: its next call reads the secret in the same container.
    expect(valueOf(await call(TENANT_A, GET, { sessionId: session }))).to.equal('a-secret');

    // While A's call runs, B's call naming the session does not wait for A's turn.
    const order: string[] = [];
    const running = call(TENANT_A, SLOW, { sessionId: session }).then((outcome) =>
      order.push(`A ${codeOf(outcome)}`),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const busy = await call(TENANT_B, QUICK, { sessionId: session });
    order.push(`B ${codeOf(busy)}`);
    await running;
    expect(order).to.deep.equal(['B NOT_FOUND', 'A OK']);
    expect(busy.error?.details).to.equal(stolen.error?.details);

    // Once A ends it, B's answer is still the same; A's own call now hears it ended.
    expect(await end(session, TENANT_A)).to.deep.include({ ended: true, workerId: 'own-w1' });
    const afterEnd = await call(TENANT_B, GET, { sessionId: session });
    expect(afterEnd.error?.details).to.equal(stolen.error?.details);
    const own = await call(TENANT_A, GET, { sessionId: session });
    expect(codeOf(own)).to.equal('NOT_FOUND');
    expect(own.error?.details).to.match(/^session expired: session \S+ ended at seq \d+ \(ended\)/);

    // The operator's log says what happened; the log replays to the owner it recorded.
    expect(warnings("names another tenant's session")).to.have.length.at.least(4);
    expect(warnings("names another tenant's session")[0]).to.deep.include({
      tenantId: 'tenant-b',
      ownerTenantId: 'tenant-a',
      foreignId: session,
    });
    expect(foldLog(test.logDir).sessions.get(session)?.tenantId).to.equal('tenant-a');
  });

  it("refuses B's reuse of A's request ID, finished or in flight, in the same words, and keeps A's retry_of working", async () => {
    expect(valueOf(await call(TENANT_A, QUICK, { requestId: 'rid-of-tenant-a' }))).to.equal(1);

    const reused = await call(TENANT_B, QUICK, { requestId: 'rid-of-tenant-a' });
    expect(codeOf(reused)).to.equal('ALREADY_EXISTS');
    expect(reused.error?.details).to.equal(
      'request rid-of-tenant-a is already in use: every call needs its own request ID',
    );
    // A's call ended before its events committed: wait for the log on disk.
    await settledLog(test);
    expect(foldLog(test.logDir).routing.calls.get('rid-of-tenant-a')?.tenantId).to.equal(
      'tenant-a',
    );
    // A's retry of its own call is still A's to make.
    const retry = await call(TENANT_A, QUICK, { retryOf: 'rid-of-tenant-a' });
    expect(valueOf(retry)).to.equal(1);

    // An ID in flight: B hears what A hears for its own duplicate.
    const running = call(TENANT_A, SLOW, { requestId: 'rid-running-a' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const fromB = await call(TENANT_B, QUICK, { requestId: 'rid-running-a' });
    const fromA = await call(TENANT_A, QUICK, { requestId: 'rid-running-a' });
    expect(valueOf(await running)).to.equal('slow');
    expect([codeOf(fromB), fromB.error?.details]).to.deep.equal([
      'ALREADY_EXISTS',
      'request rid-running-a is already in use: every call needs its own request ID',
    ]);
    expect([codeOf(fromA), fromA.error?.details]).to.deep.equal([
      codeOf(fromB),
      fromB.error?.details,
    ]);

    expect(warnings("reuses another tenant's request ID")[0]).to.deep.include({
      tenantId: 'tenant-b',
      ownerTenantId: 'tenant-a',
      foreignId: 'rid-of-tenant-a',
    });
  });
});
