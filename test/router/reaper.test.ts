import { expect } from 'chai';
import { validateEvent, type ClusterEvent, type NewEvent } from '../../src/events/index.js';
import { evolve } from '../../src/projections/index.js';
import { reap } from '../../src/core/liveness/reaper.js';
import { DEFAULT_CONFIG, type Config } from '../../src/shared/config.js';
import {
  container,
  history,
  pinned,
  placed,
  registered,
  START_MS,
  utilization,
} from '../support/events.js';

/** Epoch ms of a history's seq `seq` plus `extra` ms. */
function after(seq: number, extra: number): number {
  return START_MS + seq * 1000 + extra;
}

const config: Config = {
  ...DEFAULT_CONFIG,
  WORKER_TTL: 30_000,
  EXECUTOR_TTL: 600_000,
  EXECUTOR_ERROR_TTL: 60_000,
  EXECUTION_TIMEOUT: 3_600_000,
};

/** `event` stamped with `seq` at epoch ms `at`, as the log would. */
function stamped(event: NewEvent, seq: number, at: number): ClusterEvent {
  return validateEvent({ ...event, seq, at: new Date(at).toISOString() });
}

const routerStarted: NewEvent = {
  type: 'RouterStarted',
  config: { ...config },
  version: 't',
  rulesVersion: null,
  routerId: null,
  takeoverFrom: null,
  schemaVersion: null,
};

describe('reaper (pure)', () => {
  it('does nothing while everything is fresh', () => {
    const given = history(routerStarted, registered('w1'), container('w1', 'c1', 'ready'));
    expect(reap(given.state(), after(3, 1000), config)).to.deep.equal([]);
  });

  it('evicts a worker silent for more than WORKER_TTL, expiring the sessions pinned there', () => {
    const given = history(
      routerStarted,
      registered('w1'),
      container('w1', 'c1', 'busy'),
      pinned('s1', 'w1', 'c1', 'r1'),
      registered('w2'),
    );
    // w1 last heard at seq 3 (its container report); w2 at seq 5.
    const events = reap(given.state(), after(3, 30_001), config);
    expect(events).to.deep.equal([
      { type: 'WorkerEvicted', workerId: 'w1', reason: 'ttl' },
      // Ended by the eviction, the pass's first event.
      {
        type: 'SessionExpired',
        sessionId: 's1',
        reason: 'worker_evicted',
        causeSeq: given.lastSeq + 1,
      },
    ]);
    expect(reap(given.state(), after(3, 30_000), config), 'exactly the TTL is not more').to.eql([]);
  });

  it('counts silence from the router start when the router started later', () => {
    const given = history(registered('w1'), utilization('w1'), routerStarted);
    // Heard at seq 2, router started at seq 3: silence counts from seq 3.
    expect(reap(given.state(), after(2, 30_500), config)).to.deep.equal([]);
    expect(reap(given.state(), after(3, 30_001), config)).to.deep.equal([
      { type: 'WorkerEvicted', workerId: 'w1', reason: 'ttl' },
    ]);
  });

  it('evicts a silent leaving worker as left', () => {
    const given = history(routerStarted, registered('w1'), {
      type: 'WorkerLeaving',
      workerId: 'w1',
    });
    expect(reap(given.state(), after(3, 30_001), config)).to.deep.equal([
      { type: 'WorkerEvicted', workerId: 'w1', reason: 'left' },
    ]);
  });

  it('never evicts twice', () => {
    const given = history(routerStarted, registered('w1'), {
      type: 'WorkerEvicted',
      workerId: 'w1',
      reason: 'probe',
    });
    expect(reap(given.state(), after(3, 999_999), config)).to.deep.equal([]);
  });

  it('forgets an idle container the worker never reported removed after EXECUTOR_TTL plus a report interval, an errored one after EXECUTOR_ERROR_TTL', () => {
    const given = history(
      routerStarted,
      registered('w1'),
      container('w1', 'idle', 'ready'),
      pinned('s1', 'w1', 'idle', 'r1'),
      container('w1', 'broken', 'error'),
      container('w1', 'working', 'busy'),
    );
    // Keep the worker heard from (a report at the end) so only containers are due.
    const state = evolve(given.state(), stamped(utilization('w1'), 7, after(5, 600_000)));
    expect(reap(state, after(5, 60_001), config)).to.deep.equal([
      { type: 'ContainerForgotten', workerId: 'w1', containerId: 'broken', reason: 'error' },
    ]);
    // The worker destroys an idle container at EXECUTOR_TTL and reports it: that is its story.
    const interval = config.WORKER_UTILIZATION_INTERVAL;
    expect(reap(state, after(3, 600_000 + interval), config)).to.deep.equal([
      { type: 'ContainerForgotten', workerId: 'w1', containerId: 'broken', reason: 'error' },
    ]);
    expect(reap(state, after(3, 600_001 + interval), config)).to.deep.equal([
      { type: 'ContainerForgotten', workerId: 'w1', containerId: 'idle', reason: 'unreported' },
      // Ended by that ContainerForgotten, the pass's first event.
      {
        type: 'SessionExpired',
        sessionId: 's1',
        reason: 'container_forgotten',
        causeSeq: state.lastSeq + 1,
      },
      { type: 'ContainerForgotten', workerId: 'w1', containerId: 'broken', reason: 'error' },
    ]);
  });

  it('does not forget an idle container a call in flight was placed on', () => {
    const given = history(
      routerStarted,
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1', 'r0'),
      placed('r1', 'w1', { sessionId: 's1', containerId: 'c1' }),
      utilization('w1'),
    );
    const state = evolve(given.state(), stamped(utilization('w1'), 7, after(3, 700_000)));
    expect(reap(state, after(3, 700_000), config)).to.deep.equal([]);
  });

  it('force-releases a reservation older than twice EXECUTION_TIMEOUT, unpinning the pin it created', () => {
    const given = history(
      routerStarted,
      registered('w1'),
      placed('r1', 'w1', { sessionId: 's1' }),
      { type: 'CallBound', requestId: 'r1', containerId: 'c1', checkpointId: null },
      pinned('s1', 'w1', 'c1', 'r1'),
      placed('r2', 'w1'),
    );
    const now = after(3, 2 * 3_600_000 + 1);
    // Keep w1 alive at that time.
    const state = evolve(given.state(), stamped(utilization('w1'), 7, now));
    expect(reap(state, now, config)).to.deep.equal([
      { type: 'ReservationExpired', requestId: 'r1' },
      { type: 'SessionUnpinned', sessionId: 's1', reason: 'reservation_expired' },
    ]);
    expect(reap(state, after(6, 2 * 3_600_000 + 1), config)).to.deep.equal([
      { type: 'ReservationExpired', requestId: 'r1' },
      { type: 'SessionUnpinned', sessionId: 's1', reason: 'reservation_expired' },
      { type: 'ReservationExpired', requestId: 'r2' },
    ]);
  });

  it('then folds to a state the next pass leaves alone (idempotent)', () => {
    const given = history(
      routerStarted,
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1', 'r1'),
      placed('r2', 'w1'),
    );
    const now = after(5, 3 * 3_600_000);
    const events = reap(given.state(), now, config);
    expect(events.map((event) => event.type)).to.deep.equal([
      'WorkerEvicted',
      'SessionExpired',
      'ReservationExpired',
    ]);
    given.add(...events);
    expect(reap(given.state(), now, config)).to.deep.equal([]);
    expect(given.state().sessions.get('s1')?.expired?.reason).to.equal('worker_evicted');
    expect(given.state().reservations.size).to.equal(0);
  });
});
