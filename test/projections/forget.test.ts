import { expect } from 'chai';
import type { NewEvent } from '../../src/events/index.js';
import { place, PlacementCaches } from '../../src/core/placement/index.js';
import { fold, snapshotOf } from '../../src/projections/index.js';
import { validateEvent } from '../../src/events/index.js';
import {
  atOf,
  demand,
  finished,
  history,
  type History,
  pinned,
  placed,
  registered,
  requested,
  utilization,
} from '../support/events.js';

/** A router start whose retentions are 10 s (events in a `history` are 1 s apart). */
const started: NewEvent = {
  type: 'RouterStarted',
  config: { SESSION_RETENTION: 10_000, PIN_RETENTION: 10_000 },
  version: 'test',
  rulesVersion: null,
  routerId: null,
  takeoverFrom: null,
  schemaVersion: null,
};

/** `count` load reports of w1: time passing, one second each. */
function heartbeats(given: History, count: number): History {
  for (let i = 0; i < count; i += 1) given.add(utilization('w1'));
  return given;
}

const ended = (sessionId: string): NewEvent => ({
  type: 'SessionEnded',
  sessionId,
  tenantId: 'acme',
  workerId: 'w1',
  containerId: 'c1',
});

const placeIn = (given: History, sessionId: string) => {
  const state = given.state();
  return place(
    state,
    { requestId: `r-${given.lastSeq}`, sessionId, demand: demand() },
    { config: state.config, caches: new PlacementCaches() },
  );
};

describe('projection: forgetting what no rule needs', () => {
  it('given an ended session, then its calls are refused until SESSION_RETENTION has passed, and after it the ID is unknown', () => {
    const given = history(started, registered('w1'), pinned('s1', 'w1', 'c1'), ended('s1'));
    const endedAt = given.lastSeq;

    // Within the window: still remembered, still refused.
    heartbeats(given, 10);
    expect(given.state().sessions.get('s1')?.expired?.reason).to.equal('ended');
    const refused = placeIn(given, 's1');
    expect(refused.outcome === 'rejected' && refused.code).to.equal('NOT_FOUND');

    // The first event more than 10 s after the end forgets it; a call naming it starts anew.
    heartbeats(given, 1);
    expect(Date.parse(atOf(given.lastSeq)) - Date.parse(atOf(endedAt))).to.equal(11_000);
    const after = given.state();
    expect(after.sessions.has('s1')).to.equal(false);
    expect(after.sessionExpiries.size).to.equal(0);
    expect(placeIn(given, 's1').outcome).to.equal('placed');
  });

  it('given sessions ending one after another, when time passes, then each is forgotten in turn and live ones stay', () => {
    const given = history(
      started,
      registered('w1'),
      pinned('live', 'w1', 'c0'),
      pinned('s1', 'w1', 'c1'),
      ended('s1'),
      pinned('s2', 'w1', 'c2'),
      { type: 'SessionExpired', sessionId: 's2', reason: 'container_removed', causeSeq: null },
    );
    heartbeats(given, 10);
    expect([...given.state().sessions.keys()]).to.deep.equal(['live', 's2']);
    heartbeats(given, 2);
    expect([...given.state().sessions.keys()]).to.deep.equal(['live']);
    heartbeats(given, 60);
    expect(given.state().sessions.get('live')?.pin?.containerId).to.equal('c0');
  });

  it('given tenant calls, when PIN_RETENTION passes with only load reports, then finished calls are forgotten and running ones kept', () => {
    const given = history(
      started,
      registered('w1'),
      requested('done', { tenantId: 'acme' }),
      placed('done', 'w1'),
      finished('done'),
      requested('running', { tenantId: 'acme' }),
      placed('running', 'w1'),
    );
    heartbeats(given, 15);
    const state = given.state();
    expect([...state.routing.calls.keys()]).to.deep.equal(['running']);
    // Kept as if requested at the event that found it due, so its retry still finds it.
    expect(state.routing.calls.get('running')?.tenantId).to.equal('acme');
  });

  it('given a Snapshot taken while sessions were remembered, then folding on from it forgets them as the whole log does', () => {
    const given = history(
      started,
      registered('w1'),
      pinned('s1', 'w1', 'c1'),
      ended('s1'),
      pinned('s2', 'w1', 'c2'),
      ended('s2'),
    );
    heartbeats(given, 3);
    const prefix = given.state();
    const snapshot = validateEvent({
      seq: given.lastSeq + 1,
      at: atOf(given.lastSeq + 1),
      type: 'Snapshot',
      schemaVersion: prefix.schemaVersion,
      state: snapshotOf(prefix),
    });
    heartbeats(given, 20);
    const tail = given.events.slice(prefix.lastSeq);
    const whole = fold(given.events);
    const fromSnapshot = fold([snapshot, ...tail.slice(1)]);
    expect(whole.sessions.size).to.equal(0);
    expect(fromSnapshot.sessions.size).to.equal(0);
    expect(fromSnapshot.sessionExpiries.size).to.equal(0);
    // And midway: the restored order forgets s1 before s2, as the live fold does.
    // (s1 ended at seq 4, s2 at seq 6: at seq 16 only s1 is more than 10 s past.)
    const midway = fold([snapshot, ...given.events.slice(prefix.lastSeq + 1, 16)]);
    const live = fold(given.events.slice(0, 16));
    expect([...midway.sessions.keys()]).to.deep.equal([...live.sessions.keys()]);
    expect([...live.sessions.keys()]).to.deep.equal(['s2']);
  });
});
