import { expect } from 'chai';
import { AuthorizationError, TimeoutError } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import {
  EventLogError,
  isClusterStarting,
  JetStreamUnavailableError,
  waitForCluster,
  type ClusterWaitReport,
} from '../../src/events/index.js';

/** What a JetStream server answers with an API error (the far side of this boundary). */
function apiError(errCode: number, description: string): JetStreamApiError {
  return new JetStreamApiError({ code: 503, err_code: errCode, description });
}

/** An attempt that fails with each of `errors` in turn, then resolves with `value`. */
function failingThen<T>(
  errors: readonly Error[],
  value: T,
): { attempt: () => Promise<T>; calls: () => number } {
  let calls = 0;
  return {
    attempt: () => {
      const error = errors[calls];
      calls += 1;
      return error ? Promise.reject(error) : Promise.resolve(value);
    },
    calls: () => calls,
  };
}

describe('waiting for a NATS cluster that is still starting', () => {
  it('counts an election, missing peers, a timeout and a refused connection as starting', () => {
    expect(isClusterStarting(apiError(10008, 'JetStream system temporarily unavailable'))).to.equal(
      true,
    );
    expect(isClusterStarting(apiError(10005, 'no suitable peers for placement'))).to.equal(true);
    expect(isClusterStarting(new TimeoutError())).to.equal(true);
    expect(
      isClusterStarting(new EventLogError('nats://x:1/s: cannot reach NATS (connection refused)')),
    ).to.equal(true);
    // Wrapped: the cause decides.
    expect(
      isClusterStarting(
        new EventLogError('nats://x:1/s: request failed', { cause: new TimeoutError() }),
      ),
    ).to.equal(true);
  });

  it('does not count what waiting cannot change: another stream shape, bad credentials, a missing stream', () => {
    expect(
      isClusterStarting(
        apiError(10058, 'stream name already in use with a different configuration'),
      ),
    ).to.equal(false);
    expect(isClusterStarting(apiError(10059, 'stream not found'))).to.equal(false);
    expect(isClusterStarting(new AuthorizationError('Authorization Violation'))).to.equal(false);
    expect(
      isClusterStarting(new EventLogError('nats://x:1/s: no event log (no stream s)')),
    ).to.equal(false);
  });

  it('retries a starting cluster, reporting the first failure, and returns what the attempt returns', async () => {
    const { attempt, calls } = failingThen(
      [new TimeoutError(), apiError(10008, 'JetStream system temporarily unavailable')],
      'opened',
    );
    const reports: ClusterWaitReport[] = [];
    const result = await waitForCluster(attempt, {
      what: 'open the event log',
      waitMs: 10_000,
      onWait: (report) => reports.push(report),
    });
    expect(result).to.equal('opened');
    expect(calls()).to.equal(3);
    // The second failure came within 5 s of the first: one report.
    expect(reports).to.have.length(1);
    expect(reports[0]).to.include({ what: 'open the event log', waitMs: 10_000 });
    expect(reports[0]?.problem).to.match(/timeout/i);
  });

  it('throws a refusal waiting cannot change at once, as it is', async () => {
    const refusal = apiError(10058, 'stream name already in use with a different configuration');
    const { attempt, calls } = failingThen([refusal], 'never');
    const error = await waitForCluster(attempt, { what: 'open', waitMs: 10_000 }).catch(
      (e: unknown) => e,
    );
    expect(error).to.equal(refusal);
    expect(calls()).to.equal(1);
  });

  it('gives up after the wait with a message that names the last problem, what to check and the setting', async () => {
    const started = Date.now();
    const error = await waitForCluster(() => Promise.reject(new TimeoutError()), {
      what: 'open the event log nats://127.0.0.1:4222/readie',
      waitMs: 600,
      waitSetting: '--log-wait',
    }).catch((e: unknown) => e);
    expect(Date.now() - started).to.be.within(550, 3_000);
    expect(error).to.be.instanceOf(JetStreamUnavailableError);
    const message = (error as Error).message;
    expect(message).to.contain('could not open the event log nats://127.0.0.1:4222/readie');
    expect(message).to.contain('within 0.6 s (last: timeout)');
    expect(message).to.contain('a majority of its nodes run');
    expect(message).to.contain('--log-wait sets how long to wait');
    expect((error as JetStreamUnavailableError).code).to.equal('UNAVAILABLE');
  });

  it('counts the wait from `startedAt`, so later steps of one start share it', async () => {
    const { attempt, calls } = failingThen([new TimeoutError(), new TimeoutError()], 'late');
    const error = await waitForCluster(attempt, {
      what: 'open the leader lease',
      waitMs: 1_000,
      startedAt: Date.now() - 1_000,
    }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(JetStreamUnavailableError);
    expect(calls()).to.equal(1);
  });
});
