import { expect } from 'chai';
import { workerDiagnosis } from '../../src/router/workers/worker-diagnosis.js';
import { routerDiagnosis } from '../../src/worker/registry/router-diagnosis.js';

// A health probe or a worker's report is not a user's call: a connection lost under either says
// it was lost before the other side answered, naming who and where.
describe('a connection lost between router and worker, in words that fit a probe and a report', () => {
  it("the router's probe of a worker whose connection reset", async () => {
    const text = await workerDiagnosis('st-w1', '127.0.0.1:45625', true, 'read ECONNRESET');
    expect(text).to.equal(
      'the connection to worker st-w1 at 127.0.0.1:45625 was lost before it answered: it stopped ' +
        'or restarted, or the network dropped the connection',
    );
  });

  it("a worker's report to a router whose connection reset", async () => {
    const text = await routerDiagnosis('127.0.0.1:50051', true, 'read ECONNRESET');
    expect(text).to.include('the connection to the router at 127.0.0.1:50051 was lost before it');
    expect(text).not.to.include('during the call');
  });

  it('a failure that is not about the connection has no diagnosis', async () => {
    expect(await workerDiagnosis('st-w1', '127.0.0.1:45625', true, 'worker is draining')).to.equal(
      null,
    );
  });
});
