import { expect } from 'chai';
import { transportProblemOf } from '../../src/shared/transport-problem.js';

describe('transportProblemOf: what a failed connection says about its cause', () => {
  it('reads the texts grpc-js gives for a name that does not resolve, and nothing else as one', () => {
    expect(
      transportProblemOf('Name resolution failed for target dns:router.invalid:50051'),
    ).to.equal('unresolved');
    expect(transportProblemOf('getaddrinfo ENOTFOUND router.invalid')).to.equal('unresolved');
    // A deadline's timings name every step, resolution included: the name resolved in 4 ms.
    expect(
      transportProblemOf(
        'Deadline exceeded after 5.001s,name resolution: 0.004s,metadata filters: 0.001s,Waiting for LB pick',
      ),
    ).to.equal(null);
    expect(
      transportProblemOf('No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1'),
    ).to.equal('refused');
  });
});
