/**
 * Every released rules version decides as it did: the steps in which versions 2, 3 and 4 differ
 * are kept in the core and taken by the version a log's `RouterStarted` recorded (today's router
 * records today's).
 */
import { expect } from 'chai';
import {
  KEPT_RULES_VERSIONS,
  PLACEMENT_RULES_VERSION,
  place,
  PlacementCaches,
  rulesSteps,
  type CallToPlace,
} from '../../src/core/placement/index.js';
import { EVENT_SCHEMA_VERSION, type NewEvent } from '../../src/events/index.js';
import type { ClusterState } from '../../src/projections/index.js';
import {
  container,
  demand,
  finished,
  history,
  pinned,
  placed,
  registered,
  requested,
} from '../support/events.js';

/**
 * A router start recording rules `version`, with retentions of 10 s (events are 1 s apart). Rules
 * before 4 were only ever written in event schema v1 (v2 came with rules 4 in force).
 */
function startedUnder(version: number): NewEvent {
  return {
    type: 'RouterStarted',
    config: { SESSION_RETENTION: 10_000, PIN_RETENTION: 10_000 },
    version: 'test',
    rulesVersion: version,
    routerId: null,
    takeoverFrom: null,
    schemaVersion: version >= 4 ? EVENT_SCHEMA_VERSION : null,
  };
}

function callOf(tenantId: string, requestId: string, sessionId: string | null = null): CallToPlace {
  return { requestId, sessionId, tenantId, retryOf: null, demand: demand() };
}

/** A's session S in container c1 on w1, its call finished. */
function sessionOfA(): NewEvent[] {
  return [
    registered('w1'),
    requested('a1', { tenantId: 'tenant-a', sessionId: 'S' }),
    placed('a1', 'w1', { sessionId: 'S' }),
    { type: 'CallBound', requestId: 'a1', containerId: 'c1', checkpointId: null },
    pinned('S', 'w1', 'c1', 'a1'),
    finished('a1'),
  ];
}

describe('core: each released rules version decides as it did', () => {
  it("keeps versions 2 to today, and a version it does not keep (1, or a newer one) takes today's steps", () => {
    expect(KEPT_RULES_VERSIONS).to.deep.equal([
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      9,
      10,
      PLACEMENT_RULES_VERSION,
    ]);
    expect(PLACEMENT_RULES_VERSION).to.equal(11);
    expect(rulesSteps(10).pinsSessionOnce).to.equal(false);
    expect(rulesSteps(11).pinsSessionOnce).to.equal(true);
    expect(rulesSteps(9).costsImages).to.equal(false);
    expect(rulesSteps(10).costsImages).to.equal(true);
    expect(rulesSteps(8).queuesPinnedCalls).to.equal(false);
    expect(rulesSteps(9).queuesPinnedCalls).to.equal(true);
    expect(rulesSteps(null).version).to.equal(PLACEMENT_RULES_VERSION);
    expect(rulesSteps(PLACEMENT_RULES_VERSION + 1).version).to.equal(PLACEMENT_RULES_VERSION);
    expect(rulesSteps(7).prefersImageHolders).to.equal(false);
    expect(rulesSteps(PLACEMENT_RULES_VERSION).prefersImageHolders).to.equal(true);
    expect(rulesSteps(2)).to.deep.include({ sameProcessKeepsResidency: false, owners: false });
    expect(rulesSteps(5).shedsLoadsPastDeadline).to.equal(false);
    expect(rulesSteps(6).shedsLoadsPastDeadline).to.equal(true);
    expect(rulesSteps(6).sessionContainersHoldSlots).to.equal(false);
    expect(rulesSteps(7).sessionContainersHoldSlots).to.equal(true);
    // This step reads the version the log recorded: a log that recorded none counts as recorded.
    expect(rulesSteps(null).sessionContainersHoldSlots).to.equal(false);
    // A newer version than this code keeps decides by today's steps, all of them.
    expect(rulesSteps(PLACEMENT_RULES_VERSION + 1)).to.deep.equal(
      rulesSteps(PLACEMENT_RULES_VERSION),
    );
    // Read for every call and event: made once per version, and no reader can change them.
    expect(rulesSteps(7)).to.equal(rulesSteps(7));
    expect(Object.isFrozen(rulesSteps(7))).to.equal(true);
  });

  it('given a session pinned to c1, then under 11 a call placed in c1 appends no SessionPinned, and under 10 one that changes nothing', () => {
    const after = new Map<number, ClusterState>();
    for (const version of [10, 11]) {
      const before = history(startedUnder(version), ...sessionOfA());
      const decision = place(before.state(), callOf('tenant-a', 'a2', 'S'), {
        config: before.state().config,
        caches: new PlacementCaches(),
      });
      expect(decision, `v${version}`).to.deep.include({ workerId: 'w1', containerId: 'c1' });
      const types = decision.events.map((event) => event.type);
      expect(types, `v${version}`).to.deep.equal(
        version === 11 ? ['CallPlaced'] : ['CallPlaced', 'SessionPinned'],
      );
      after.set(version, before.add(...decision.events).state());
    }
    // The event 10 appended is one the fold passes over: 11's state without it is the same.
    expect(after.get(11)?.sessions).to.deep.equal(after.get(10)?.sessions);
    expect(after.get(11)?.workers).to.deep.equal(after.get(10)?.workers);
    expect(after.get(11)?.reservations).to.deep.equal(after.get(10)?.reservations);
  });

  it('given a session pinned to c1 with no checkpoint known, then under 11 a call placed in c1 that learned it pins it again', () => {
    const events = sessionOfA();
    const before = history(
      startedUnder(11),
      ...events.slice(0, -1),
      container('w1', 'c1', 'busy', 'ckpt'),
      events.at(-1)!,
    );
    expect(before.state().sessions.get('S')?.pin?.checkpointId).to.equal(null);
    const decision = place(before.state(), callOf('tenant-a', 'a2', 'S'), {
      config: before.state().config,
      caches: new PlacementCaches(),
    });
    expect(decision.events.map((event) => event.type)).to.deep.equal([
      'CallPlaced',
      'SessionPinned',
    ]);
    expect(decision.events[1]).to.deep.include({ containerId: 'c1', checkpointId: 'ckpt' });
  });

  it("given another tenant's session, then under 4 the call is refused NOT_FOUND, and under 3 it is placed in it", () => {
    for (const [version, outcome] of [
      [4, 'rejected'],
      [3, 'placed'],
    ] as const) {
      const state = history(startedUnder(version), ...sessionOfA()).state();
      const decision = place(state, callOf('tenant-b', 'b1', 'S'), {
        config: state.config,
        caches: new PlacementCaches(),
      });
      expect(decision.outcome, `v${version}`).to.equal(outcome);
      if (decision.outcome === 'rejected') expect(decision.code).to.equal('NOT_FOUND');
      else expect(decision).to.deep.include({ workerId: 'w1', containerId: 'c1' });
    }
  });

  it("given another tenant's remembered request ID, then under 4 it is refused, and under 3 taken over", () => {
    for (const [version, outcome] of [
      [4, 'rejected'],
      [3, 'placed'],
    ] as const) {
      const state = history(
        startedUnder(version),
        registered('w1'),
        requested('r1', { tenantId: 'tenant-a' }),
        placed('r1', 'w1'),
        finished('r1'),
      ).state();
      const decision = place(state, callOf('tenant-b', 'r1'), {
        config: state.config,
        caches: new PlacementCaches(),
      });
      expect(decision.outcome, `v${version}`).to.equal(outcome);
    }
  });

  it('given an ended session long past SESSION_RETENTION, then under 4 it is forgotten, and under 3 still refused as expired', () => {
    for (const [version, remembered] of [
      [4, false],
      [3, true],
    ] as const) {
      const given = history(startedUnder(version), ...sessionOfA(), {
        type: 'SessionEnded',
        sessionId: 'S',
        tenantId: 'tenant-a',
        workerId: 'w1',
        containerId: 'c1',
      });
      for (let i = 0; i < 20; i += 1) given.add(container('w1', `c${i + 2}`, 'ready'));
      expect(given.state().sessions.has('S'), `v${version}`).to.equal(remembered);
    }
  });

  it('given a status report from the same worker process, then under 3 its residency is kept, and under 2 forgotten', () => {
    for (const [version, kept] of [
      [3, true],
      [2, false],
    ] as const) {
      const state = history(
        startedUnder(version),
        registered('w1', { instanceId: 'i-1' }),
        {
          type: 'ResidencyChanged',
          workerId: 'w1',
          checkpointId: 'v1',
          state: 'resident',
          error: null,
        },
        registered('w1', { instanceId: 'i-1' }),
      ).state();
      const versions = state.routing.workers.get('w1')?.versions;
      expect(versions?.has('v1') ?? false, `v${version}`).to.equal(kept);
    }
  });
});
