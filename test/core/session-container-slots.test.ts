/**
 * A session's container holds its slot until its worker reports it gone (placement rules 7;
 * docs/cluster-state.md, "Container slots"): the router never frees a slot its worker may still
 * hold, so a call it places is never refused by the worker for its container limit. Under 6 the
 * router freed it in two ways, kept here as they were: (a) the session ended while the record of
 * its container still said `busy` (the worker's `ready` report not yet folded), (b) the session's
 * call ended before the worker had reported the container at all.
 */
import { expect } from 'chai';
import { reportOpensRoom } from '../../src/core/admission/room.js';
import { decide } from '../../src/core/decisions.js';
import { place, PlacementCaches, type CallToPlace } from '../../src/core/placement/index.js';
import { EVENT_SCHEMA_VERSION, type NewEvent } from '../../src/events/index.js';
import type { ClusterState } from '../../src/projections/cluster-state.js';
import { slotsCounted } from '../../src/projections/queries.js';
import { stateFromJson, stateToJson } from '../../src/projections/snapshot.js';
import {
  container,
  demand,
  history,
  pinned,
  placed,
  registered,
  requested,
  utilization,
  type History,
} from '../support/events.js';

function startedUnder(version: number): NewEvent {
  return {
    type: 'RouterStarted',
    config: {},
    version: 'test',
    rulesVersion: version,
    routerId: null,
    takeoverFrom: null,
    schemaVersion: EVENT_SCHEMA_VERSION,
  };
}

/** Session S's call a1 on w1 (one container slot), in a new container c1 the call's answer named. */
function sessionCallBound(version: number): History {
  return history(
    startedUnder(version),
    registered('w1', { maxContainers: 1, instanceId: 'i1' }),
    requested('a1', { tenantId: 'alpha', sessionId: 'S' }),
    placed('a1', 'w1', { sessionId: 'S' }),
    // The router appends both on the worker's first answer naming the container.
    { type: 'CallBound', requestId: 'a1', containerId: 'c1', checkpointId: null },
    pinned('S', 'w1', 'c1', 'a1'),
  );
}

const finished = (requestId: string, ok = true): NewEvent => ({
  type: 'CallFinished',
  requestId,
  ok,
  code: ok ? null : 'FAILED_PRECONDITION',
  message: ok ? null : 'could not install the packages',
  raised: null,
  inputsRaised: null,
});

const ended: NewEvent = {
  type: 'SessionEnded',
  sessionId: 'S',
  tenantId: 'alpha',
  workerId: 'w1',
  containerId: 'c1',
};

/** Another tenant's call, placed on `state`: where the worker's one slot is. */
function placeBeta(state: ClusterState, requestId = 'b1') {
  const call: CallToPlace = {
    requestId,
    sessionId: null,
    tenantId: 'beta',
    retryOf: null,
    demand: demand(),
  };
  return place(state, call, { config: state.config, caches: new PlacementCaches() }).outcome;
}

describe('core: a session container holds its slot until its worker reports it gone (rules 7)', () => {
  it('(a) given a session ended while its container was last reported busy, when a call comes, then under 7 it does not fit until the worker reports the container removed, and under 6 it was placed', () => {
    for (const [version, outcome] of [
      [7, 'rejected'],
      [6, 'placed'],
    ] as const) {
      // The worker reported the container busy; its call succeeded (the worker keeps it, ready,
      // for the session) and the session ended before the worker's `ready` report arrived.
      const given = sessionCallBound(version).add(container('w1', 'c1', 'busy'), finished('a1'));
      given.add(ended);
      expect(placeBeta(given.state()), `v${version}`).to.equal(outcome);
      if (version === 6) continue;
      // Then the worker's `ready` report: it still holds the container.
      expect(placeBeta(given.add(container('w1', 'c1', 'ready')).state())).to.equal('rejected');
      // Then it destroys it, told the session ended, and says so: the slot is free.
      expect(placeBeta(given.add(container('w1', 'c1', 'removed')).state())).to.equal('placed');
    }
  });

  it('(b) given a session call that ended before its worker reported its container, when a call comes, then under 7 it does not fit, the session live or ended, and under 6 it was placed', () => {
    for (const [version, outcome] of [
      [7, 'rejected'],
      [6, 'placed'],
    ] as const) {
      const given = sessionCallBound(version).add(finished('a1'));
      expect(placeBeta(given.state()), `v${version}, session live`).to.equal(outcome);
      given.add(ended);
      expect(placeBeta(given.state()), `v${version}, session ended`).to.equal(outcome);
      if (version === 6) continue;
      // Then the worker's reports arrive late, in its order: busy, ready, removed.
      expect(placeBeta(given.add(container('w1', 'c1', 'busy')).state())).to.equal('rejected');
      expect(placeBeta(given.add(container('w1', 'c1', 'ready')).state())).to.equal('rejected');
      expect(placeBeta(given.add(container('w1', 'c1', 'removed')).state())).to.equal('placed');
    }
  });

  it('given a session call that failed (the worker may keep its container, as after a failed install, or destroy it), then under 7 its container holds the slot until the worker reports it gone', () => {
    const given = sessionCallBound(7).add(container('w1', 'c1', 'busy'), finished('a1', false), {
      type: 'SessionUnpinned',
      sessionId: 'S',
      reason: 'call_failed',
    });
    expect(placeBeta(given.state())).to.equal('rejected');
    expect(placeBeta(given.add(container('w1', 'c1', 'error')).state())).to.equal('placed');
  });

  it('given a plain call (no session) that ended before its worker reported its container, then its slot is free at once under 7 too (the worker destroys it before the call ends)', () => {
    const given = history(
      startedUnder(7),
      registered('w1', { maxContainers: 1 }),
      requested('p1', { tenantId: 'alpha' }),
      placed('p1', 'w1'),
      { type: 'CallBound', requestId: 'p1', containerId: 'c1', checkpointId: null },
      finished('p1'),
    );
    expect(placeBeta(given.state())).to.equal('placed');
    // Its late `busy` report does not take the slot back: no session keeps it.
    expect(placeBeta(given.add(container('w1', 'c1', 'busy')).state())).to.equal('placed');
  });

  it('given a session container whose removal report was lost, then a full report that leaves it out keeps it once (it may predate the container) and the next frees its slot; a report that lists it keeps it', () => {
    const full = (reportSeq: number, listed: boolean) =>
      utilization('w1', {
        containerCount: listed ? 1 : 0,
        containers: listed ? [{ containerId: 'c1', state: 'ready', checkpointId: null }] : [],
        reportSeq,
      });
    const lost = sessionCallBound(7).add(finished('a1'), ended);
    const before = lost.state().workers.get('w1')!;
    const firstReport = { memoryUsed: 0, gpuMemoryUsed: null, containerCount: 0 };
    expect(reportOpensRoom(before, { ...firstReport, containers: [], reportSeq: 10 })).to.equal(
      true, // the worker's first load report: room is decided again whatever it says
    );
    lost.add(full(10, false));
    expect(placeBeta(lost.state())).to.equal('rejected');
    const second = { ...firstReport, containers: [], reportSeq: 20 };
    expect(reportOpensRoom(lost.state().workers.get('w1'), second)).to.equal(true);
    lost.add(full(20, false));
    expect(placeBeta(lost.state())).to.equal('placed');

    const listed = sessionCallBound(7).add(finished('a1'), ended, full(10, false), full(20, true));
    expect(placeBeta(listed.state())).to.equal('rejected');
    expect(listed.state().workers.get('w1')!.containers.get('c1')?.state).to.equal('ready');
  });

  it("given a session container whose earlier reports a full report overtook, when the worker's removal report arrives, older than that full report, then under 7 it is recorded and frees the slot (under 6 it was not recorded)", () => {
    for (const version of [7, 6]) {
      // The full report (numbered 10) was taken after the container was made and destroyed; the
      // container's own reports (busy 4, removed 5) arrive after it.
      const given = sessionCallBound(version).add(
        finished('a1'),
        ended,
        utilization('w1', { containerCount: 0, containers: [], reportSeq: 10 }),
      );
      const removal = decide('containerReport', given.state(), {
        workerId: 'w1',
        containerId: 'c1',
        state: 'removed',
        checkpointId: null,
        instanceId: 'i1',
        reportSeq: 5,
      });
      if (version === 6) {
        expect(removal.events, 'v6').to.deep.equal([]);
        continue;
      }
      expect(placeBeta(given.state())).to.equal('rejected');
      expect(removal.events.map((event) => event.type)).to.deep.equal(['ContainerStateChanged']);
      expect(placeBeta(given.add(...removal.events).state())).to.equal('placed');
    }
  });

  it('given a worker evicted or restarted, then its session containers hold nothing', () => {
    const given = () => sessionCallBound(7).add(finished('a1'), ended);
    const evicted = given().add({ type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' }).state();
    expect(evicted.workers.get('w1')!.sessionContainers.size).to.equal(0);
    const restarted = given()
      .add(registered('w1', { maxContainers: 1, instanceId: 'i2' }))
      .state();
    expect(restarted.workers.get('w1')!.sessionContainers.size).to.equal(0);
    expect(placeBeta(restarted)).to.equal('placed');
  });

  it('given a snapshot of a state holding unreported session containers, then it restores them and their slots', () => {
    const state = sessionCallBound(7).add(finished('a1'), ended).state();
    const worker = state.workers.get('w1')!;
    expect(slotsCounted(worker)).to.equal(1);
    const restored = stateFromJson(stateToJson(state)).workers.get('w1')!;
    expect([...restored.sessionContainers]).to.deep.equal([
      ['c1', { sessionId: 'S', unlisted: false }],
    ]);
    expect(restored.idleContainers).to.equal(1);
  });
});
