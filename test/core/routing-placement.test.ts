/**
 * Given / when / then tests of a pinned call's placement (docs/tenant-routing.md): given the
 * cluster's events, when a pinned call arrives, then its decision and the events it records.
 */
import { expect } from 'chai';
import {
  explainPlacement,
  place,
  PlacementCaches,
  type PlacedDecision,
  type PlacementDecision,
  type RejectedDecision,
} from '../../src/core/placement/index.js';
import { rendezvousScore } from '../../src/core/placement/index.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import {
  atOf,
  demand,
  finished,
  GiB,
  history,
  placed,
  registered,
  requested,
  utilization,
} from '../support/events.js';
import {
  pinnedCall,
  residency,
  revised,
  routerWithVersions,
  subsetOf,
} from '../support/routing.js';

const WORKERS = ['w1', 'w2', 'w3', 'w4', 'w5'];

function fleet() {
  return history(...routerWithVersions(), ...WORKERS.map((id) => registered(id)));
}

function expectPlaced(decision: PlacementDecision): PlacedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return decision as PlacedDecision;
}

function expectRejected(
  decision: PlacementDecision,
  code: string,
  words?: RegExp,
): RejectedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('rejected');
  const rejection = decision as RejectedDecision;
  expect(rejection.code).to.equal(code);
  if (words) expect(rejection.message).to.match(words);
  return rejection;
}

const [t1First, t1Second] = subsetOf('t1', 'policy-v1', WORKERS, 2) as [string, string];

describe('pinned placement', () => {
  describe('the rendezvous hash', () => {
    it('is the first 8 bytes of SHA-256 over tenant, version and worker, big-endian', () => {
      // Reference values computed with Python's hashlib.
      expect(rendezvousScore('t1', 'policy-v1', 'w1')).to.equal(14467582492921379226n);
      expect(rendezvousScore('acme', 'screen-2026-01', 'worker-07')).to.equal(
        10286224179368001086n,
      );
    });
  });

  describe('before the subset', () => {
    it('refuses a pinned call without a tenant with FAILED_PRECONDITION', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'));
      const decision = place(given.state(), pinnedCall('r', null));
      expectRejected(decision, 'FAILED_PRECONDITION', /needs a tenant/);
      expect(decision.events).to.have.length(1);
      expect(decision.events[0]).to.deep.include({ version: null, routingRevision: null });
    });

    it('refuses pinned with disable_optimized_execution as INVALID_ARGUMENT', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'));
      const call = pinnedCall('r', 't1', { demand: { disableOptimizedExecution: true } });
      expectRejected(place(given.state(), call), 'INVALID_ARGUMENT', /disable_optimized_execution/);
    });

    it("refuses a retry of another tenant's call with PERMISSION_DENIED", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        revised(2, 't2', 'policy-v2'),
        requested('theirs', { tenantId: 't2', demand: demand({ pinned: true }) }),
      );
      const call = pinnedCall('mine', 't1', { retryOf: 'theirs' });
      expectRejected(place(given.state(), call), 'PERMISSION_DENIED', /not this tenant's call/);
      // The same rule for a call that is not pinned.
      const plain = {
        requestId: 'plain',
        sessionId: null,
        tenantId: 't1',
        retryOf: 'theirs',
        demand: demand(),
      };
      expectRejected(place(given.state(), plain), 'PERMISSION_DENIED');
    });

    it('refuses a tenant without an entry: "tenant T has no pinned version"', () => {
      const decision = place(fleet().state(), pinnedCall('r', 't1'));
      expectRejected(decision, 'FAILED_PRECONDITION', /tenant t1 has no pinned version/);
    });

    it('refuses a call naming another checkpoint than its version, recording the resolution', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'));
      const call = pinnedCall('r', 't1', { demand: { checkpointId: 'policy-v2' } });
      const decision = expectRejected(
        place(given.state(), call),
        'FAILED_PRECONDITION',
        /only ever served by its version/,
      );
      expect(decision.events.at(-1)).to.deep.include({
        version: 'policy-v1',
        routingRevision: 1,
        retryAfterMs: null,
      });
    });

    it('refuses a version the catalogue in force does not list, and a GPU call for a CPU version', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'), revised(2, 't2', 'policy-gone'));
      expectRejected(
        place(given.state(), pinnedCall('a', 't2')),
        'FAILED_PRECONDITION',
        /not in the catalogue in force/,
      );
      const gpu = pinnedCall('b', 't1', { demand: { gpu: true } });
      expectRejected(place(given.state(), gpu), 'FAILED_PRECONDITION', /cpu workers only/);
    });

    it("answers UNAVAILABLE when no worker of the version's flavor is a candidate", () => {
      const given = history(...routerWithVersions(), registered('g1', { flavor: 'gpu' })).add(
        revised(1, 't1', 'policy-v1'),
      );
      expectRejected(place(given.state(), pinnedCall('r', 't1')), 'UNAVAILABLE', /no cpu worker/);
    });
  });

  describe('holders and cold loads', () => {
    it('places on a holder of the subset, with coldLoad false, version and revision', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(t1Second, 'policy-v1', 'resident'),
      );
      const decision = expectPlaced(place(given.state(), pinnedCall('r', 't1')));
      expect(decision).to.deep.include({
        workerId: t1Second,
        checkpointId: 'policy-v1',
        version: 'policy-v1',
        routingRevision: 1,
        coldLoad: false,
      });
      expect(decision.events[0]).to.deep.include({
        type: 'CallPlaced',
        coldLoad: false,
        routingRevision: 1,
      });
    });

    it('prefers among holders the best by the seed ranking key', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(t1First, 'policy-v1', 'resident'),
        residency(t1Second, 'policy-v1', 'resident'),
        utilization(t1First, { memoryUsed: 8 * GiB }),
      );
      expect(expectPlaced(place(given.state(), pinnedCall('r', 't1'))).workerId).to.equal(t1Second);
    });

    it('ignores a holder outside the subset: never a worker the key does not hash to', () => {
      const outside = WORKERS.find((id) => id !== t1First && id !== t1Second) as string;
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(outside, 'policy-v1', 'resident'),
      );
      const decision = expectPlaced(place(given.state(), pinnedCall('r', 't1')));
      expect([t1First, t1Second]).to.include(decision.workerId);
      expect(decision.coldLoad).to.equal(true);
    });

    it('cold-loads on the best subset member when no member holds the version', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        utilization(t1First, { memoryUsed: 4 * GiB }),
      );
      const decision = expectPlaced(place(given.state(), pinnedCall('r', 't1')));
      expect(decision).to.deep.include({
        workerId: t1Second,
        coldLoad: true,
        version: 'policy-v1',
      });
    });

    it('sheds while the loader has a cold load in flight, even with another member idle, with the hint', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        utilization(t1First, { memoryUsed: 4 * GiB }),
        placed('first', t1Second, {
          checkpointId: 'policy-v1',
          version: 'policy-v1',
          routingRevision: 1,
          coldLoad: true,
        }),
      );
      const decision = expectRejected(
        place(given.state(), pinnedCall('second', 't1')),
        'RESOURCE_EXHAUSTED',
        /retry in 2s/,
      );
      expect(decision.retryAfterMs).to.equal(DEFAULT_CONFIG.ROUTING_RETRY_AFTER);
      expect(decision.events.at(-1)).to.deep.include({
        type: 'CallRejected',
        version: 'policy-v1',
        routingRevision: 1,
        retryAfterMs: 2000,
      });
    });

    it('takes ROUTING_RETRY_AFTER from the config in force', () => {
      const given = history(
        ...routerWithVersions({ ROUTING_RETRY_AFTER: 750 }),
        ...WORKERS.map((id) => registered(id)),
      ).add(
        revised(1, 't1', 'policy-v1'),
        residency(t1First, 'other', 'loading'),
        residency(t1Second, 'other', 'loading'),
      );
      expect(
        expectRejected(place(given.state(), pinnedCall('r', 't1')), 'RESOURCE_EXHAUSTED')
          .retryAfterMs,
      ).to.equal(750);
    });

    it("counts any version's load, from a loading report until the next report of it", () => {
      const loading = fleet().add(
        revised(1, 't1', 'policy-v1'),
        utilization(t1First, { memoryUsed: 4 * GiB }),
        residency(t1Second, 'policy-v2', 'loading'),
      );
      expectRejected(place(loading.state(), pinnedCall('r', 't1')), 'RESOURCE_EXHAUSTED');
      const done = loading.add(residency(t1Second, 'policy-v2', 'resident'));
      expect(expectPlaced(place(done.state(), pinnedCall('r', 't1')))).to.deep.include({
        workerId: t1Second,
        coldLoad: true,
      });
    });

    it("ends a placed cold load at its version's report, its CallFinished or its ReservationExpired", () => {
      const base = () =>
        fleet().add(
          revised(1, 't1', 'policy-v1'),
          utilization(t1First, { memoryUsed: 4 * GiB }),
          placed('load', t1Second, {
            checkpointId: 'policy-v1',
            version: 'policy-v1',
            routingRevision: 1,
            coldLoad: true,
          }),
        );
      const ends = [
        residency(t1Second, 'policy-v1', 'failed', 'boom'),
        {
          type: 'CallFinished' as const,
          requestId: 'load',
          ok: false,
          code: 'UNAVAILABLE' as const,
          message: null,
          raised: null,
          inputsRaised: null,
        },
        { type: 'ReservationExpired' as const, requestId: 'load' },
      ];
      for (const end of ends) {
        const decision = place(base().add(end).state(), pinnedCall('next', 't1'));
        expect(decision.outcome, end.type).to.equal('placed');
      }
      // A loading report of that version does not end the call's load.
      expectRejected(
        place(
          base()
            .add(residency(t1Second, 'policy-v1', 'loading'))
            .state(),
          pinnedCall('next', 't1'),
        ),
        'RESOURCE_EXHAUSTED',
      );
    });

    it('sheds when no subset member passes the filters', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(t1First, 'policy-v1', 'resident'),
        utilization(t1First, { memoryUsed: 15 * GiB }),
        utilization(t1Second, { memoryUsed: 15 * GiB }),
      );
      expectRejected(
        place(given.state(), pinnedCall('r', 't1')),
        'RESOURCE_EXHAUSTED',
        /filters ruled them all out/,
      );
    });

    it("a new registration or an eviction clears the worker's residency and loads", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1', 1),
        residency(t1First, 'policy-v1', 'resident'),
      );
      expect(expectPlaced(place(given.state(), pinnedCall('r', 't1'))).coldLoad).to.equal(false);
      given.add(registered(t1First));
      expect(expectPlaced(place(given.state(), pinnedCall('r', 't1'))).coldLoad).to.equal(true);
    });
  });

  describe('one resolution', () => {
    it('a retry after a flip keeps the version its first try resolved to', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        requested('first', { tenantId: 't1', demand: demand({ pinned: true }) }),
        {
          type: 'CallRejected',
          requestId: 'first',
          sessionId: null,
          code: 'RESOURCE_EXHAUSTED',
          message: 'shed',
          version: 'policy-v1',
          routingRevision: 1,
          retryAfterMs: 2000,
        },
        revised(2, 't1', 'policy-v2', 2, 'policy-v1'),
      );
      const retry = expectPlaced(
        place(given.state(), pinnedCall('again', 't1', { retryOf: 'first' })),
      );
      expect(retry).to.deep.include({ version: 'policy-v1', routingRevision: 1 });
      const fresh = expectPlaced(place(given.state(), pinnedCall('new', 't1')));
      expect(fresh).to.deep.include({ version: 'policy-v2', routingRevision: 2 });
    });

    it('a retry of a call with no resolution resolves the entry in force', () => {
      const given = fleet().add(
        requested('early', { tenantId: 't1', demand: demand({ pinned: true }) }),
        revised(1, 't1', 'policy-v2'),
      );
      expect(
        expectPlaced(place(given.state(), pinnedCall('again', 't1', { retryOf: 'early' }))),
      ).to.deep.include({ version: 'policy-v2' });
    });

    it("a session's calls keep its first placed call's resolution across a flip", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        requested('s1', { tenantId: 't1', sessionId: 'S', demand: demand({ pinned: true }) }),
        placed('s1', t1First, {
          sessionId: 'S',
          checkpointId: 'policy-v1',
          version: 'policy-v1',
          routingRevision: 1,
          coldLoad: true,
        }),
        finished('s1'),
        revised(2, 't1', 'policy-v2', 2, 'policy-v1'),
      );
      const later = expectPlaced(place(given.state(), pinnedCall('s2', 't1', { sessionId: 'S' })));
      expect(later).to.deep.include({ version: 'policy-v1', routingRevision: 1 });
      const other = expectPlaced(place(given.state(), pinnedCall('o1', 't1', { sessionId: 'T' })));
      expect(other).to.deep.include({ version: 'policy-v2', routingRevision: 2 });
    });

    it("reuses a session's container that holds the version, without a cold load", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        requested('s1', { tenantId: 't1', sessionId: 'S', demand: demand({ pinned: true }) }),
        placed('s1', t1First, {
          sessionId: 'S',
          checkpointId: 'policy-v1',
          version: 'policy-v1',
          routingRevision: 1,
          coldLoad: true,
        }),
        { type: 'CallBound', requestId: 's1', containerId: 'c1', checkpointId: 'policy-v1' },
        {
          type: 'SessionPinned',
          sessionId: 'S',
          workerId: t1First,
          containerId: 'c1',
          requestId: 's1',
          checkpointId: 'policy-v1',
        },
        finished('s1'),
      );
      const decision = expectPlaced(
        place(given.state(), pinnedCall('s2', 't1', { sessionId: 'S' })),
      );
      expect(decision).to.deep.include({
        workerId: t1First,
        containerId: 'c1',
        coldLoad: false,
        version: 'policy-v1',
      });
    });

    it("refuses a session of another tenant as one it does not have: NOT_FOUND, the owner's record unchanged", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        revised(2, 't2', 'policy-v1'),
        requested('s1', { tenantId: 't1', sessionId: 'S', demand: demand({ pinned: true }) }),
        placed('s1', t1First, {
          sessionId: 'S',
          checkpointId: 'policy-v1',
          version: 'policy-v1',
          routingRevision: 1,
          coldLoad: true,
        }),
      );
      const decision = place(given.state(), pinnedCall('x', 't2', { sessionId: 'S' }));
      expectRejected(decision, 'NOT_FOUND', /^session not found: this caller has no session S;/);
      expect(decision.outcome === 'rejected' && decision.version).to.equal(null);
      expect(
        given
          .add(...decision.events)
          .state()
          .sessions.get('S')?.tenantId,
      ).to.equal('t1');
    });
  });

  describe('calls that are not pinned', () => {
    it('are placed by the seed rules whatever their tenant, never on an on-demand version', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(t1First, 'policy-v1', 'resident'),
      );
      const decision = expectPlaced(
        place(given.state(), {
          requestId: 'r',
          sessionId: null,
          tenantId: 't1',
          demand: demand({ imports: ['numpy'] }),
        }),
      );
      expect(decision).to.deep.include({
        workerId: 'w1',
        checkpointId: 'checkpoint_0',
        version: null,
        routingRevision: null,
        coldLoad: false,
      });
      expect(decision.events[0]).to.deep.include({
        version: null,
        routingRevision: null,
        coldLoad: false,
      });
    });

    it('may name an on-demand checkpoint explicitly', () => {
      const decision = expectPlaced(
        place(fleet().state(), {
          requestId: 'r',
          sessionId: null,
          demand: demand({ checkpointId: 'policy-v2' }),
        }),
      );
      expect(decision.checkpointId).to.equal('policy-v2');
    });
  });

  describe('with caches and exclusions', () => {
    it('decides the same with the subset cache, across membership changes', () => {
      const caches = new PlacementCaches();
      let state: ClusterState = initialState();
      let seq = 0;
      const add = (...events: Parameters<typeof history>) => {
        for (const { type, ...fields } of events) {
          seq += 1;
          state = applyInPlace(
            state,
            { seq, at: atOf(seq), cause: null, type, ...fields } as never,
            caches,
          );
        }
      };
      add(
        ...routerWithVersions(),
        ...WORKERS.map((id) => registered(id)),
        revised(1, 't1', 'policy-v1'),
      );
      const check = () => {
        const call = pinnedCall(`r${seq}`, 't1');
        expect(place(state, call, { caches })).to.deep.equal(place(state, call));
      };
      check();
      add(utilization(t1First, { memoryUsed: GiB }));
      check();
      add({ type: 'WorkerLeaving', workerId: t1First });
      check();
      add(registered('w6'), registered(t1First));
      check();
    });

    it('leaves unreachable workers out of the same subset: never a worker outside it, never another version', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1', 2),
        residency(t1First, 'policy-v1', 'resident'),
        residency(t1Second, 'policy-v1', 'resident'),
      );
      const decision = expectPlaced(
        place(given.state(), pinnedCall('r', 't1'), { unreachable: [t1First] }),
      );
      expect(decision).to.deep.include({
        workerId: t1Second,
        version: 'policy-v1',
        coldLoad: false,
      });
      const shed = place(given.state(), pinnedCall('r', 't1'), {
        unreachable: [t1First, t1Second],
      });
      expect(shed).to.deep.include({ outcome: 'rejected', code: 'RESOURCE_EXHAUSTED' });
      expect(shed.events.at(-1)).to.deep.include({
        version: 'policy-v1',
        routingRevision: 1,
        retryAfterMs: 2000,
      });
    });
  });

  describe('the explanation', () => {
    it("shows the resolution, every candidate's score and subset place, holders, loads and the verdict", () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        residency(t1First, 'policy-v1', 'resident'),
        residency(t1Second, 'policy-v2', 'loading'),
      );
      const explanation = explainPlacement(given.state(), pinnedCall('r', 't1'));
      const routing = explanation.routing;
      expect(routing?.resolved).to.match(
        /tenant t1's entry in force: version "policy-v1", k 2, revision 1/,
      );
      expect(routing?.candidates.map((c) => c.workerId)).to.have.members(WORKERS);
      const first = routing?.candidates.find((c) => c.workerId === t1First);
      expect(first).to.deep.include({ subsetRank: 1, holds: true, residency: 'resident' });
      expect(first?.score).to.equal(rendezvousScore('t1', 'policy-v1', t1First).toString());
      const second = routing?.candidates.find((c) => c.workerId === t1Second);
      expect(second).to.deep.include({ subsetRank: 2, holds: false, loading: 'policy-v2' });
      expect(routing?.candidates.filter((c) => c.subsetRank === null)).to.have.length(3);
      expect(routing?.verdict).to.match(new RegExp(`placed on ${t1First}: it holds`));
      expect(explanation.decision).to.deep.equal(place(given.state(), pinnedCall('r', 't1')));
    });
  });
});
