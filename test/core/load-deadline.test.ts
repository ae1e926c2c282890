/**
 * Given / when / then tests of deadlines in admission (docs/tenant-routing.md, "Deadlines";
 * placement rules v6): given a pinned version whose catalogue `loadCost` is 5 s (or one whose
 * loads were measured), when a pinned call arrives with what its caller's deadline leaves it
 * (`CallRequested.deadlineMs`), then a cold load it would not wait for is shed with the
 * retry-after hint, and everything else is placed as before.
 */
import { expect } from 'chai';
import { decide } from '../../src/core/decisions.js';
import {
  explainPlacement,
  place,
  type PlacedDecision,
  type PlacementDecision,
  type RejectedDecision,
} from '../../src/core/placement/index.js';
import type { Catalogue, NewEvent } from '../../src/events/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import { history, registered, started } from '../support/events.js';
import {
  pinnedCall,
  residency,
  revised,
  subsetOf,
  VERSIONS_CATALOGUE,
} from '../support/routing.js';

const WORKERS = ['w1', 'w2', 'w3', 'w4', 'w5'];
const LOAD_MS = 5000;
const [first, second] = subsetOf('t1', 'policy-v1', WORKERS, 2) as [string, string];

/** The versions catalogue, policy-v1 declaring its load cost (policy-v2 declares none). */
const CATALOGUE: Catalogue = {
  ...VERSIONS_CATALOGUE,
  flavors: {
    ...VERSIONS_CATALOGUE.flavors,
    cpu: {
      ...(VERSIONS_CATALOGUE.flavors.cpu as NonNullable<Catalogue['flavors']['cpu']>),
      checkpoints: (VERSIONS_CATALOGUE.flavors.cpu?.checkpoints ?? []).map((checkpoint) =>
        checkpoint.id === 'policy-v1' ? { ...checkpoint, loadCost: LOAD_MS } : checkpoint,
      ),
    },
  },
};

/** Five workers, tenant t1 pinned to `version` on 2 of them, under `rulesVersion`. */
function given(rulesVersion: number, version = 'policy-v1', ...more: NewEvent[]) {
  return history(
    started({}, rulesVersion),
    { type: 'CatalogueLoaded', revision: 'v', catalogue: CATALOGUE },
    ...WORKERS.map((id) => registered(id)),
    revised(1, 't1', version),
    ...more,
  ).state();
}

/** A pinned call of t1 whose caller's deadline leaves it `deadlineMs` (null: none). */
function callWith(deadlineMs: number | null) {
  return pinnedCall('r1', 't1', { deadlineMs });
}

function expectPlaced(decision: PlacementDecision): PlacedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return decision as PlacedDecision;
}

function expectShed(decision: PlacementDecision): RejectedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('rejected');
  const shed = decision as RejectedDecision;
  expect(shed.code).to.equal('RESOURCE_EXHAUSTED');
  expect(shed.retryAfterMs).to.equal(DEFAULT_CONFIG.ROUTING_RETRY_AFTER);
  return shed;
}

describe('core: deadlines in admission (a cold load the caller would not wait for)', () => {
  it('given no holder, when the deadline leaves less than the load cost, then the call is shed with the hint, naming both', () => {
    const shed = expectShed(place(given(6), callWith(2000)));
    expect(shed.message).to.equal(
      `version "policy-v1" is not resident on its subset and a cold load on ${second} takes 5s ` +
        "(its catalogue loadCost), but the caller's deadline leaves only 2s (a load it would not " +
        'wait for is not started): retry in 2s (ROUTING_RETRY_AFTER)',
    );
    // The load is not started for this call, but its loader is asked to pre-warm the version.
    expect(shed.prewarm).to.deep.equal({ workerId: second, version: 'policy-v1' });
    expect(shed.events).to.deep.equal([
      {
        type: 'CallRejected',
        requestId: 'r1',
        sessionId: null,
        code: 'RESOURCE_EXHAUSTED',
        message: shed.message,
        version: 'policy-v1',
        routingRevision: 1,
        retryAfterMs: 2000,
      },
    ]);
  });

  it('given no holder, when the deadline leaves exactly the load cost, then it is shed (the load would end as the caller gives up)', () => {
    expectShed(place(given(6), callWith(LOAD_MS)));
  });

  it('given no holder, when the deadline leaves more than the load cost, then the call cold-loads as before', () => {
    const placed = expectPlaced(place(given(6), callWith(LOAD_MS + 1)));
    expect(placed).to.deep.include({ workerId: second, coldLoad: true, version: 'policy-v1' });
  });

  it('given a subset member holding the version, when the deadline is short, then the call is placed on it warm', () => {
    const state = given(6, 'policy-v1', residency(first, 'policy-v1', 'resident'));
    const placed = expectPlaced(place(state, callWith(1)));
    expect(placed).to.deep.include({ workerId: first, coldLoad: false });
  });

  it('given no deadline, then the call cold-loads as before', () => {
    expect(expectPlaced(place(given(6), callWith(null))).coldLoad).to.equal(true);
    expect(expectPlaced(place(given(6), pinnedCall('r1', 't1'))).coldLoad).to.equal(true);
  });

  it('given a version whose catalogue entry declares no load cost and no load of it measured, then the call cold-loads whatever its deadline', () => {
    expect(expectPlaced(place(given(6, 'policy-v2'), callWith(1))).coldLoad).to.equal(true);
  });

  it("given a version without a loadCost that its loader loaded in 1 s before, then the worker's measured load decides", () => {
    const members = subsetOf('t1', 'policy-v2', WORKERS, 2);
    // Each member loaded it once (loading, then resident a second later), then let it go.
    const measured = members.flatMap((id) => [
      residency(id, 'policy-v2', 'loading'),
      residency(id, 'policy-v2', 'resident'),
      residency(id, 'policy-v2', 'evicted'),
    ]);
    const state = given(6, 'policy-v2', ...measured);
    for (const id of members) {
      expect(state.routing.workers.get(id)?.versions.get('policy-v2')).to.deep.include({
        state: 'evicted',
        loadMs: 1000,
      });
    }
    const shed = expectShed(place(state, callWith(1000)));
    expect(shed.message).to.match(
      /a cold load on w\d takes 1s \(its last load there, measured\), but the caller's deadline leaves only 1s/,
    );
    expect(expectPlaced(place(state, callWith(1001))).coldLoad).to.equal(true);
  });

  it("given a loadCost in the catalogue and a faster measured load, then the catalogue's word decides", () => {
    const members = subsetOf('t1', 'policy-v1', WORKERS, 2);
    const measured = members.flatMap((id) => [
      residency(id, 'policy-v1', 'loading'),
      residency(id, 'policy-v1', 'resident'),
      residency(id, 'policy-v1', 'evicted'),
    ]);
    const shed = expectShed(place(given(6, 'policy-v1', ...measured), callWith(2000)));
    expect(shed.message).to.contain('takes 5s (its catalogue loadCost)');
  });

  it('given a log recorded under rules 5, then a short deadline starts the load as it did', () => {
    const placed = expectPlaced(place(given(5), callWith(2000)));
    expect(placed).to.deep.include({ workerId: second, coldLoad: true });
  });

  it('when decided as a call, then CallRequested records the deadline and the shed follows it; explain says why', () => {
    const state = given(6);
    const made = decide('call', state, { call: callWith(2000) });
    expect(made.events.map((event) => event.type)).to.deep.equal(['CallRequested', 'CallRejected']);
    expect(made.events[0]).to.deep.include({ deadlineMs: 2000 });
    const explained = explainPlacement(state, callWith(2000));
    expect(explained.routing?.verdict).to.match(
      /^shed: version "policy-v1" is not resident on its subset and a cold load on w\d takes 5s \(its catalogue loadCost\), but the caller's deadline leaves only 2s/,
    );
  });
});
