import { expect } from 'chai';
import type { ClusterEvent } from '../../src/events/index.js';
import { Replayer } from '../../replay/engine/replayer.js';
import { recordScenario } from '../../replay/engine/scenario.js';
import { container, demand, GiB, history, registered, requested } from '../support/events.js';
import { replayEvents } from '../support/replay.js';

describe('the replay engine', () => {
  it('simulates a hand-written log: computed decisions are folded as if appended', () => {
    const log = history(
      registered('a', { memoryTotal: 10 * GiB }),
      registered('b', { memoryTotal: 10 * GiB }),
      requested('r1', { demand: demand({ memory: 8 * GiB }) }),
      requested('r2', { demand: demand({ memory: 8 * GiB }) }),
      requested('r3', { demand: demand({ memory: 8 * GiB }) }),
    ).events;
    const results = replayEvents(log);
    expect(
      results.map((r) => [
        r.requestId,
        r.recorded,
        r.decision.outcome,
        r.decision.outcome === 'placed' ? r.decision.workerId : r.decision.code,
      ]),
    ).to.deep.equal([
      ['r1', 'none', 'placed', 'a'],
      ['r2', 'none', 'placed', 'b'],
      ['r3', 'none', 'rejected', 'RESOURCE_EXHAUSTED'],
    ]);
  });

  it('folds the computed decisions so that the state after a simulation holds their reservations', () => {
    const replayer = new Replayer();
    for (const event of history(registered('a'), requested('r1'), requested('r2')).events)
      replayer.push(event);
    replayer.end();
    expect([...replayer.state.reservations.keys()]).to.deep.equal(['r1', 'r2']);
    expect(replayer.state.workers.get('a')?.inFlight).to.equal(2);
  });

  it('recognizes the recorded step of a dropped pin and a reused container as one outcome', () => {
    const log = recordScenario([
      registered('w1'),
      registered('w2'),
      { step: 'call', requestId: 'first', sessionId: 's1' },
      { step: 'bound', requestId: 'first', containerId: 'c1' },
      { step: 'finish', requestId: 'first', ok: true },
      { step: 'call', requestId: 'reuse', sessionId: 's1' },
      { step: 'finish', requestId: 'reuse', ok: true },
      container('w1', 'c1', 'error'),
      { step: 'call', requestId: 'moved', sessionId: 's1' },
    ]);
    const kinds = log.map((e) => e.type);
    expect(kinds).to.include.members(['SessionUnpinned', 'SessionPinned']);
    const results = replayEvents(log);
    expect(results.map((r) => [r.requestId, r.recorded])).to.deep.equal([
      ['first', 'match'],
      ['reuse', 'match'],
      ['moved', 'match'],
    ]);
    expect(results[2]?.recordedEvents?.map((e) => e.type)).to.deep.equal([
      'SessionUnpinned',
      'CallPlaced',
    ]);
    expect(results[1]?.recordedEvents?.map((e) => e.type)).to.deep.equal([
      'CallPlaced',
      'SessionPinned',
    ]);
  });

  it('decides under --set overrides and reports the recorded outcome as diverged', () => {
    const log = recordScenario([
      registered('w1', { memoryTotal: 10 * GiB }),
      { step: 'call', requestId: 'r1', demand: { memory: 8 * GiB } },
    ]);
    const [result] = replayEvents(log, { overrides: { MEMORY_HEADROOM: 0.5 } });
    expect(result?.recorded).to.equal('diverged');
    expect(result?.divergence).to.equal('recorded CallPlaced, now CallRejected');
  });

  it('treats a call whose outcome the log lacks at its end as unrecorded', () => {
    const results = replayEvents(history(registered('w1'), requested('last')).events);
    expect(results.map((r) => r.recorded)).to.deep.equal(['none']);
  });

  it('refuses to record a scenario call whose decision is not the one it expects', () => {
    const steps = [
      registered('w1', { memoryTotal: 10 * GiB }),
      { step: 'call', requestId: 'r1', demand: { memory: GiB }, expect: 'w1' },
    ] as const;
    expect(recordScenario(steps).map((e) => e.type)).to.include('CallPlaced');
    expect(() =>
      recordScenario([
        ...steps,
        { step: 'call', requestId: 'r2', demand: { memory: 9 * GiB }, expect: 'w1' },
      ]),
    ).to.throw(
      'scenario: r2 was expected to get w1, but placement rejected it with RESOURCE_EXHAUSTED: ',
    );
    expect(() =>
      recordScenario([steps[0], { step: 'call', requestId: 'r3', expect: 'UNAVAILABLE' }]),
    ).to.throw('scenario: r3 was expected to get UNAVAILABLE, but placement placed it on w1');
  });

  describe('grouping a decision by its cause', () => {
    const scenario = () =>
      recordScenario([
        registered('w1'),
        { step: 'call', requestId: 'r1', sessionId: 's1' },
        { step: 'bound', requestId: 'r1', containerId: 'c1' },
        { step: 'call', requestId: 'r2' },
      ]);
    /** `log` with an extra event inserted after `seq`, renumbered, recording `cause`. */
    const inserted = (log: ClusterEvent[], seq: number, extra: Record<string, unknown>) =>
      [...log.slice(0, seq), { ...log[seq - 1], ...extra }, ...log.slice(seq)].map(
        (event, i) => ({ ...event, seq: i + 1 }) as ClusterEvent,
      );

    it('records every event of a decision with its call as the cause', () => {
      const log = scenario();
      const placed = log.find((e) => e.type === 'CallPlaced' && e.requestId === 'r1')!;
      expect(placed.cause).to.equal('call:r1');
      expect(log.find((e) => e.type === 'CallBound')?.cause).to.equal('answer:r1');
      expect(log.find((e) => e.type === 'WorkerRegistered')?.cause).to.equal('report:w1');
    });

    it('takes an event the decision appended into its outcome, whatever its type or place', () => {
      const log = scenario();
      const placed = log.find((e) => e.type === 'CallPlaced' && e.requestId === 'r1')!;
      // The router appended one more event with the decision (a rule placement no longer has).
      const unpin = { type: 'SessionUnpinned', sessionId: 's1', reason: 'call_failed' };
      const [first] = replayEvents(inserted(log, placed.seq, { ...unpin, cause: 'call:r1' }));
      expect(first?.recorded).to.equal('diverged');
      expect(first?.divergence).to.equal(
        'recorded a SessionUnpinned that placement no longer makes',
      );
    });

    it('a log without causes is grouped by order, which cannot see such an event', () => {
      const log = scenario().map((e) => ({ ...e, cause: null }));
      const placed = log.find((e) => e.type === 'CallPlaced' && e.requestId === 'r1')!;
      const unpin = { type: 'SessionUnpinned', sessionId: 's1', reason: 'call_failed' };
      const results = replayEvents(inserted(log, placed.seq, unpin));
      expect(results.map((r) => r.recorded)).to.deep.equal(['match', 'match']);
      expect(results[0]?.recordedEvents?.map((e) => e.type)).to.deep.equal(['CallPlaced']);
    });
  });
});
