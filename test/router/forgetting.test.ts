import { expect } from 'chai';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdminServiceClient, type StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import { TenantServiceClient } from '../../src/proto/gen/readie/v1/tenant.js';
import { Replayer } from '../../replay/engine/replayer.js';
import {
  bearer,
  codeOf,
  readLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const TENANT = 'tenant-token-0123456789abcdef';
const W1 = 'worker-token-0123456789abcdef';
const OPERATOR = 'operator-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';
const MINUTE = 60_000;

describe('router: ended sessions and tenant calls are forgotten once no rule needs them', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let tenant: TenantServiceClient;
  let admin: AdminServiceClient;
  // The router's clock: real time, moved on by the test.
  let skew = 0;

  before(async () => {
    const dir = tempDir('readie-forgetting-');
    writeFileSync(
      join(dir, 'tokens'),
      `tenant acme ${TENANT}\nworker w1 ${W1}\noperator ops ${OPERATOR}\n`,
      { mode: 0o600 },
    );
    writeFileSync(join(dir, 'router.token'), ROUTER, { mode: 0o600 });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: join(dir, 'tokens'),
        routerTokenFile: join(dir, 'router.token'),
      },
      config: {
        SESSION_RETENTION: 10 * MINUTE,
        PIN_RETENTION: 20 * MINUTE,
        WORKER_TTL: 24 * 60 * MINUTE,
      },
      clock: () => Date.now() + skew,
    });
    worker = await ScriptedWorker.start({ workerId: 'w1', requireToken: ROUTER });
    await worker.connect(test.address, { token: W1 }).reportStatus();
    tenant = new TenantServiceClient(test.address, credentials.createInsecure());
    admin = new AdminServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    tenant.close();
    admin.close();
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  const call = (command: string, sessionId: string) =>
    run(test.client, command, { sessionId }, { metadata: bearer(TENANT) });

  const end = (sessionId: string): Promise<void> =>
    new Promise((resolve, reject) =>
      tenant.endSession({ sessionId }, bearer(TENANT), (error: ServiceError | null) =>
        error ? reject(error) : resolve(),
      ),
    );

  const listed = (): Promise<string[]> =>
    new Promise((resolve, reject) =>
      admin.status(
        { includeExpiredSessions: true },
        bearer(OPERATOR),
        (error: ServiceError | null, answer: StatusResponse) =>
          error ? reject(error) : resolve(answer.sessions.map((session) => session.sessionId)),
      ),
    );

  it('refuses an ended session for SESSION_RETENTION, then forgets it (status --expired too); the log replays the same', async () => {
    for (const sessionId of ['s-a', 's-b', 's-c']) {
      expect(codeOf(await call('echo', sessionId))).to.equal('OK');
      await end(sessionId);
    }
    expect(await listed()).to.include.members(['s-a', 's-b', 's-c']);
    expect(test.router.state.routing.calls.size).to.be.at.least(3);

    // Within the window: remembered, listed, and its calls refused.
    skew += 9 * MINUTE;
    await worker.reportUtilization();
    const refused = await call('echo', 's-a');
    expect(codeOf(refused)).to.equal('NOT_FOUND');
    expect(refused.error?.details).to.match(/session s-a ended at seq \d+ \(ended\)/);

    // Past it: the next event (a load report) forgets them; status no longer lists them.
    skew += 2 * MINUTE;
    await worker.reportUtilization();
    const state = test.router.state;
    for (const sessionId of ['s-a', 's-b', 's-c'])
      expect(state.sessions.has(sessionId)).to.equal(false);
    expect(await listed()).to.not.include.members(['s-a', 's-b', 's-c']);

    // Past PIN_RETENTION the tenant's finished calls go too.
    skew += 20 * MINUTE;
    await worker.reportUtilization();
    expect(test.router.state.routing.calls.size).to.equal(0);

    // A call naming a forgotten session starts a new one, as a never-seen ID does.
    expect(codeOf(await call('echo', 's-a'))).to.equal('OK');
    expect(test.router.state.sessions.get('s-a')?.expired).to.equal(null);

    // Replay folds the same state and reproduces every decision, the refusal included.
    const results: string[] = [];
    const replayer = new Replayer({ onCall: (result) => results.push(result.recorded) });
    for (const event of readLog(test.logDir)) replayer.push(event);
    replayer.end();
    expect(results.length).to.be.at.least(5);
    expect(results.every((recorded) => recorded === 'match')).to.equal(true);
    expect([...replayer.state.sessions.keys()]).to.deep.equal([
      ...test.router.state.sessions.keys(),
    ]);
  });
});
