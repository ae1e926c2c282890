import { expect } from 'chai';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  TenantServiceClient,
  type EndSessionResponse,
} from '../../src/proto/gen/readie/v1/tenant.js';
import { Replayer } from '../../replay/engine/replayer.js';
import {
  bearer,
  codeOf,
  foldLog,
  readLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const TENANT = 'tenant-token-0123456789abcdef';
const W1 = 'worker-token-0123456789abcdef';
const ROUTER = 'router-token-0123456789abcdef';

describe('router: a client ends its session (TenantService.EndSession)', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let tenant: TenantServiceClient;

  before(async () => {
    const dir = tempDir('readie-session-end-');
    writeFileSync(join(dir, 'tokens'), `tenant acme ${TENANT}\nworker w1 ${W1}\n`, { mode: 0o600 });
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
    tenant = new TenantServiceClient(test.address, credentials.createInsecure());
  });

  after(async () => {
    tenant.close();
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  function end(sessionId: string, token = TENANT): Promise<EndSessionResponse> {
    return new Promise((resolve, reject) =>
      tenant.endSession({ sessionId }, bearer(token), (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  const call = (command: string, sessionId: string) =>
    run(test.client, command, { sessionId }, { metadata: bearer(TENANT) });

  it('records SessionEnded, has the worker destroy the container, and refuses later calls', async () => {
    expect(codeOf(await call('echo', 's-end'))).to.equal('OK');
    const pinned = foldLog(test.logDir).sessions.get('s-end')?.pin;
    expect(pinned?.workerId).to.equal('w1');

    const answer = await end('s-end');
    expect(answer).to.deep.equal({
      ended: true,
      workerId: 'w1',
      containerId: pinned?.containerId,
      containerRemoved: true,
    });
    // The router's own credential, never the tenant's, reached the worker.
    expect(worker.sessionEnds).to.deep.equal([
      { sessionId: 's-end', containerId: pinned?.containerId, authorization: `Bearer ${ROUTER}` },
    ]);
    const ended = readLog(test.logDir).filter((event) => event.type === 'SessionEnded');
    expect(ended).to.have.length(1);
    expect(ended[0]).to.deep.include({
      cause: 'session:s-end',
      sessionId: 's-end',
      tenantId: 'acme',
      workerId: 'w1',
      containerId: pinned?.containerId,
    });

    const later = await call('echo', 's-end');
    expect(codeOf(later)).to.equal('NOT_FOUND');
    expect(later.error?.details).to.match(/session s-end ended at seq \d+ \(ended\)/);
    // A second end changes nothing, and says so.
    expect(await end('s-end')).to.deep.include({ ended: false });
    expect(worker.sessionEnds).to.have.length(1);

    // The log replays to the state the router holds.
    const replayer = new Replayer();
    for (const event of readLog(test.logDir)) replayer.push(event);
    expect(replayer.state.sessions.get('s-end')?.expired?.reason).to.equal('ended');
  });

  it('waits for the call of the session that is running, then ends it', async () => {
    expect(codeOf(await call('echo', 's-busy'))).to.equal('OK');
    const order: string[] = [];
    const running = call('sleep 600', 's-busy').then((outcome) => order.push(codeOf(outcome)));
    await new Promise((resolve) => setTimeout(resolve, 150));
    const ended = end('s-busy').then((answer) => order.push(`ended ${answer.ended}`));
    await Promise.all([running, ended]);
    expect(order).to.deep.equal(['OK', 'ended true']);
  });

  it('ends a session that never got a container without asking a worker', async () => {
    // A session the router never heard of: nothing to end.
    expect(await end('s-never')).to.deep.include({ ended: false, containerRemoved: false });
    expect(readLog(test.logDir).some((e) => e.type === 'SessionEnded' && e.sessionId === 's-never'))
      .to.be.false;
  });

  it('refuses a malformed request and credentials other than a tenant', async () => {
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => 'OK',
        (error: ServiceError) => error.code,
      );
    expect(await refusal(end(''))).to.equal(3); // INVALID_ARGUMENT
    expect(await refusal(end('x'.repeat(257)))).to.equal(3);
    expect(await refusal(end('s-other', W1))).to.equal(7); // PERMISSION_DENIED
    expect(await refusal(end('s-other', 'unknown-token-0123456789'))).to.equal(16);
  });
});
