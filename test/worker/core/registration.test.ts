/**
 * Registration's retries and the choice of router (pure): given the failed reports so far, when
 * another fails at a given time, then the pause, the warning, or the reason it gives up.
 */
import { expect } from 'chai';
import {
  afterFailedReport,
  REGISTRATION_START,
  routerAfterRefusal,
  type FailedReport,
  type Registration,
  type RegistrationPolicy,
  type RegistrationStep,
} from '../../../src/worker/core/registry/index.js';

const T0 = 1_700_000_000_000;

const policy = (fields: Partial<RegistrationPolicy> = {}): RegistrationPolicy => ({
  routers: 'r1:50051',
  routerCount: 1,
  retriesPerRouter: 3,
  retryDelayMs: 1_000,
  leaderWaitMs: 120_000,
  ...fields,
});

const failed = (kind: FailedReport['kind'], router = 'r1:50051'): FailedReport => ({
  kind,
  router,
  details: kind === 'refused' ? 'worker w1 is not allowed' : 'No connection established',
  diagnosis: kind === 'unreachable' ? 'nothing listens at r1:50051' : null,
});

/** The steps of `reports` failing one after another, at the given times. */
function steps(
  rules: RegistrationPolicy,
  ...reports: (readonly [at: number, report: FailedReport])[]
): RegistrationStep[] {
  let registration: Registration = REGISTRATION_START;
  const taken: RegistrationStep[] = [];
  for (const [at, report] of reports) {
    const step = afterFailedReport(registration, report, rules, at);
    taken.push(step);
    if (step.next === 'give-up') break;
    registration = step.registration;
  }
  return taken;
}

const delays = (taken: RegistrationStep[]) =>
  taken.map((step) => (step.next === 'retry' ? step.delayMs : step.problem));

describe('worker core: registration retries', () => {
  it('given one unreachable router, then it retries three times, doubling the pause, then gives up naming the fix', () => {
    const taken = steps(
      policy(),
      [T0, failed('unreachable')],
      [T0 + 1_000, failed('unreachable')],
      [T0 + 3_000, failed('unreachable')],
      [T0 + 7_000, failed('unreachable')],
    );
    expect(delays(taken)).to.deep.equal([
      1_000,
      2_000,
      4_000,
      'the router at r1:50051 is unreachable after 4 attempts: No connection established; nothing listens at r1:50051',
    ]);
    expect(taken[0]).to.deep.include({
      freshChannel: true,
      warning: {
        kind: 'unreachable',
        attempt: 1,
        error: 'No connection established; nothing listens at r1:50051',
      },
    });
  });

  it('given two routers, then the next one is tried at once and a pause comes only after a whole round', () => {
    const two = policy({ routers: 'r1:50051,r2:50051', routerCount: 2, retriesPerRouter: 1 });
    const taken = steps(
      two,
      [T0, failed('unreachable', 'r1:50051')],
      [T0, failed('unreachable', 'r2:50051')],
      [T0 + 1_000, failed('unreachable', 'r1:50051')],
    );
    expect(delays(taken)).to.deep.equal([
      0,
      1_000,
      'the router at r1:50051,r2:50051 is unreachable after 3 attempts: No connection established; nothing listens at r1:50051',
    ]);
  });

  it('given a router that answers with a refusal, then registration gives up at once, naming that router', () => {
    const taken = steps(policy(), [T0, failed('refused', 'r1:50051')]);
    expect(delays(taken)).to.deep.equal([
      'the router at r1:50051 refused the status report: worker w1 is not allowed',
    ]);
  });

  it('given routers that know no leader, then it waits for one up to leaderWaitMs, pausing after each round', () => {
    const two = policy({ routerCount: 2, routers: 'r1,r2', leaderWaitMs: 5_000 });
    const taken = steps(
      two,
      [T0, failed('leaderless', 'r1')],
      [T0 + 10, failed('leaderless', 'r2')],
      [T0 + 1_010, failed('leaderless', 'r1')],
      [T0 + 1_020, failed('leaderless', 'r2')],
      [T0 + 5_000, failed('leaderless', 'r1')],
    );
    expect(delays(taken)).to.deep.equal([
      0,
      1_000,
      0,
      1_000,
      'no router led within 5 s: r1 answered "No connection established"',
    ]);
    expect(taken[1]).to.deep.include({
      freshChannel: false,
      warning: { kind: 'leaderless', waitedMs: 10 },
    });
    expect(taken[0]).to.deep.include({ warning: null });
  });

  it('given the leader wait in ms, then the words say ms; leaderless answers do not spend the unreachable retries', () => {
    const taken = steps(
      policy({ leaderWaitMs: 500, retriesPerRouter: 0 }),
      [T0, failed('leaderless')],
      [T0 + 100, failed('leaderless')],
      [T0 + 600, failed('leaderless')],
    );
    expect(delays(taken)).to.deep.equal([
      1_000,
      1_000,
      'no router led within 500 ms: r1:50051 answered "No connection established"',
    ]);
    const afterWait = taken[1]!;
    expect(afterWait.next === 'retry' && afterWait.registration).to.deep.equal({
      failedAttempts: 2,
      unreachable: 0,
      leaderlessSince: T0,
    });
  });
});

describe('worker core: which router reports go to', () => {
  const routers = ['r1', 'r2', 'r3'];

  it('given a standby that names a configured leader, then reports go there', () => {
    expect(routerAfterRefusal(routers, 0, true, 'r3')).to.deep.equal({
      index: 2,
      leaderNamed: true,
    });
  });

  it('given an unreachable router, or a leader that is not configured, then the next one in the list', () => {
    expect(routerAfterRefusal(routers, 2, true, undefined)).to.deep.equal({
      index: 0,
      leaderNamed: false,
    });
    expect(routerAfterRefusal(routers, 1, true, 'elsewhere:1')).to.deep.equal({
      index: 2,
      leaderNamed: false,
    });
    expect(routerAfterRefusal(routers, 1, true, 'r2')).to.deep.equal({
      index: 2,
      leaderNamed: true,
    });
  });

  it('given one router, or a refusal that is not about reaching it, then reports stay', () => {
    expect(routerAfterRefusal(['r1'], 0, true, undefined)).to.equal(null);
    expect(routerAfterRefusal(routers, 0, false, 'r2')).to.equal(null);
  });
});
