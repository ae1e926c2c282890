import { expect } from 'chai';
import { decideSessionEnd } from '../../src/core/sessions/session-end.js';
import { place, PlacementCaches } from '../../src/core/placement/index.js';
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

describe('core: a client ends its session', () => {
  it('given a pinned session, when its client ends it, then SessionEnded names the container to destroy', () => {
    const given = history(
      registered('w1'),
      requested('r1', { sessionId: 's1', tenantId: 'acme' }),
      placed('r1', 'w1', { sessionId: 's1' }),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
      finished('r1'),
    );
    const decision = decideSessionEnd(given.state(), { sessionId: 's1', tenantId: 'acme' });
    expect(decision.cause).to.deep.equal({ kind: 'session', sessionId: 's1' });
    expect(decision.events).to.deep.equal([
      {
        type: 'SessionEnded',
        sessionId: 's1',
        tenantId: 'acme',
        workerId: 'w1',
        containerId: 'c1',
      },
    ]);
    expect(decision.container).to.deep.equal({
      workerId: 'w1',
      containerId: 'c1',
      address: 'w1.local:50052',
    });

    // Then: the session counts as expired, its container no longer pinned, and its next call refused.
    const after = given.add(...decision.events).state();
    expect(after.sessions.get('s1')?.expired?.reason).to.equal('ended');
    expect(after.workers.get('w1')?.pinnedSessions.size).to.equal(0);
    const next = place(
      after,
      { requestId: 'r2', sessionId: 's1', tenantId: 'acme', demand: demand() },
      { config: after.config, caches: new PlacementCaches() },
    );
    expect(next.outcome).to.equal('rejected');
    expect(next.outcome === 'rejected' && next.code).to.equal('NOT_FOUND');
  });

  it('records nothing for an unknown, ended or expired session', () => {
    const given = history(
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
    );
    expect(
      decideSessionEnd(given.state(), { sessionId: 'nope', tenantId: null }).events,
    ).to.deep.equal([]);
    given.add({
      type: 'SessionExpired',
      sessionId: 's1',
      reason: 'container_removed',
      causeSeq: null,
    });
    const again = decideSessionEnd(given.state(), { sessionId: 's1', tenantId: null });
    expect(again).to.deep.include({ ended: false, container: null, events: [] });
  });

  it('ends a session whose worker is gone without asking it', () => {
    const given = history(
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
      { type: 'WorkerLeaving', workerId: 'w1' },
    );
    // A leaving worker still destroys it; an evicted one is not asked.
    expect(
      decideSessionEnd(given.state(), { sessionId: 's1', tenantId: null }).container,
    ).to.not.equal(null);
  });

  it('refuses a session ID that is empty or too long', () => {
    const state = history().state();
    expect(() => decideSessionEnd(state, { sessionId: '', tenantId: null })).to.throw(/session_id/);
    expect(() => decideSessionEnd(state, { sessionId: 'x'.repeat(257), tenantId: null })).to.throw(
      /at most 256/,
    );
  });
});
