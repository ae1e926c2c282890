/**
 * Given / when / then tests of a pinned call placed again after a failed dial
 * (docs/tenant-routing.md): the same resolution (version and revision) even across a flip, only
 * the other members of the same subset (the unreachable ones left out), a shed with its
 * retry-after hint when none can take it, never another version; replay decides it the same.
 */
import { expect } from 'chai';
import { decideDialFailure } from '../../src/core/calls/dial-failure.js';
import { decideCall } from '../../src/core/calls/call-steps.js';
import {
  explainPlacement,
  PlacementCaches,
  type PlacedDecision,
  type RejectedDecision,
} from '../../src/core/placement/index.js';
import type { NewEvent } from '../../src/events/index.js';
import { applyInPlace, initialState } from '../../src/projections/index.js';
import { GiB, history, registered, utilization } from '../support/events.js';
import {
  pinnedCall,
  residency,
  revised,
  routerWithVersions,
  subsetOf,
} from '../support/routing.js';

const WORKERS = ['w1', 'w2', 'w3', 'w4', 'w5'];
const [first, second] = subsetOf('t1', 'policy-v1', WORKERS, 2) as [string, string];
const outside = WORKERS.filter((id) => id !== first && id !== second);

/** t1 pinned to policy-v1 on 2 workers, both holding it; the rest hold policy-v2 too. */
function tier(...more: NewEvent[]) {
  return history(
    ...routerWithVersions({ PROBE_FAILURE_THRESHOLD: 5 }),
    ...WORKERS.map((id) => registered(id)),
    revised(1, 't1', 'policy-v1', 2),
    residency(first, 'policy-v1', 'resident'),
    residency(second, 'policy-v1', 'resident'),
    ...outside.map((id) => residency(id, 'policy-v2', 'resident')),
    ...more,
  );
}

/** The call placed (its events folded), and the history. */
function placedCall(given: ReturnType<typeof tier>, requestId = 'r1') {
  const call = pinnedCall(requestId, 't1');
  const made = decideCall(given.state(), { call });
  given.add(...made.events);
  const placement = made.placement as PlacedDecision;
  // Both members are idle: the seed ranking key picks one; the other is the one left.
  const other = placement.workerId === first ? second : first;
  return { call, placement, other };
}

describe('a pinned call placed again after a failed dial', () => {
  it('goes to the other holder of its subset with the same version and revision', () => {
    const given = tier();
    const { call, placement, other } = placedCall(given);
    expect([first, second]).to.include(placement.workerId);
    expect(placement).to.deep.include({ version: 'policy-v1', coldLoad: false });

    const again = decideDialFailure(given.state(), {
      call,
      workerId: placement.workerId,
      error: 'ECONNREFUSED',
    });

    expect(again.events.map((event) => event.type)).to.deep.equal([
      'CallDialFailed',
      'WorkerProbeFailed',
      'CallPlaced',
    ]);
    expect(again.placement).to.deep.include({
      outcome: 'placed',
      workerId: other,
      version: 'policy-v1',
      routingRevision: 1,
      coldLoad: false,
    });
  });

  it('keeps its resolution across a flip that came while it was dialing', () => {
    const given = tier();
    const { call, placement, other } = placedCall(given);
    given.add(revised(2, 't1', 'policy-v2', 2, 'policy-v1'));

    const again = decideDialFailure(given.state(), {
      call,
      workerId: placement.workerId,
      error: 'ECONNREFUSED',
    });

    expect(again.placement).to.deep.include({
      workerId: other,
      version: 'policy-v1',
      routingRevision: 1,
    });
    const explained = explainPlacement(given.state(), call, { unreachable: [placement.workerId] });
    expect(explained.routing?.resolved).to.match(
      /this call's first placement \(placed again after a failed dial\): version "policy-v1", k 2, revision 1/,
    );
    const unreachable = explained.routing?.candidates.filter((c) => c.unreachable);
    expect(unreachable?.map((c) => c.workerId)).to.deep.equal([placement.workerId]);
    expect(unreachable?.[0]?.subsetRank).to.be.a('number');
  });

  it('cold-loads on the other member when it does not hold the version, never outside the subset', () => {
    const given = history(
      ...routerWithVersions({ PROBE_FAILURE_THRESHOLD: 5 }),
      ...WORKERS.map((id) => registered(id)),
      revised(1, 't1', 'policy-v1', 2),
      residency(first, 'policy-v1', 'resident'),
    );
    const { call } = placedCall(given);

    const again = decideDialFailure(given.state(), {
      call,
      workerId: first,
      error: 'ECONNREFUSED',
    });

    expect(again.placement).to.deep.include({
      workerId: second,
      version: 'policy-v1',
      coldLoad: true,
    });
  });

  it('is shed with the retry-after hint when no other member can take it, though others are idle', () => {
    const given = tier(utilization(second, { memoryUsed: 16 * GiB }));
    const { call } = placedCall(given);

    const again = decideDialFailure(given.state(), {
      call,
      workerId: first,
      error: 'ECONNREFUSED',
    });

    const shed = again.placement as RejectedDecision;
    expect(shed).to.deep.include({
      outcome: 'rejected',
      code: 'RESOURCE_EXHAUSTED',
      version: 'policy-v1',
      routingRevision: 1,
      retryAfterMs: DEFAULT_RETRY_AFTER_MS,
    });
    expect(shed.message).to.match(/retry in 2s \(ROUTING_RETRY_AFTER\)/);
    expect(again.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      version: 'policy-v1',
      routingRevision: 1,
      retryAfterMs: DEFAULT_RETRY_AFTER_MS,
    });
  });

  it('is shed naming both when the whole subset could not be reached', () => {
    const given = tier();
    const { call, placement, other } = placedCall(given);
    const once = decideDialFailure(given.state(), {
      call,
      workerId: placement.workerId,
      error: 'ECONNREFUSED',
    });
    given.add(...once.events);

    const twice = decideDialFailure(given.state(), {
      call,
      workerId: other,
      error: 'EHOSTUNREACH',
    });

    expect(twice.attempts).to.equal(2);
    expect(twice.placement).to.deep.include({
      outcome: 'rejected',
      code: 'RESOURCE_EXHAUSTED',
      version: 'policy-v1',
      retryAfterMs: DEFAULT_RETRY_AFTER_MS,
    });
    expect((twice.placement as RejectedDecision).message).to.match(
      new RegExp(`could not reach ${first}, ${second}, version "policy-v1"'s subset`),
    );
  });

  it('names its resolution when refused after its last attempt', () => {
    const given = history(
      ...routerWithVersions({ PROBE_FAILURE_THRESHOLD: 5 }),
      ...WORKERS.map((id) => registered(id)),
      revised(1, 't1', 'policy-v1', 3),
      ...subsetOf('t1', 'policy-v1', WORKERS, 3).map((id) =>
        residency(id, 'policy-v1', 'resident'),
      ),
    );
    const { call } = placedCall(given);
    let last;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const workerId = given.state().reservations.get('r1')?.workerId ?? '';
      last = decideDialFailure(given.state(), { call, workerId, error: 'ECONNREFUSED' });
      given.add(...last.events);
    }
    expect(last?.placement).to.deep.include({
      outcome: 'rejected',
      code: 'UNAVAILABLE',
      version: 'policy-v1',
      routingRevision: 1,
      retryAfterMs: null,
    });
  });

  it('decides the same with the caller’s caches', () => {
    const given = tier();
    const { call, placement } = placedCall(given);
    const caches = new PlacementCaches();
    let state = initialState();
    for (const event of given.events) state = applyInPlace(state, event, caches);
    const input = { call, workerId: placement.workerId, error: 'ECONNREFUSED' };
    expect(decideDialFailure(state, { ...input, caches }).events).to.deep.equal(
      decideDialFailure(state, input).events,
    );
  });
});

const DEFAULT_RETRY_AFTER_MS = 2000;
