/**
 * The journal records decisions on a real LMDB log: a decision's cause is written as its text, and
 * a decision with no events appends nothing (its callers do not check).
 */
import { expect } from 'chai';
import { EventLog } from '../../src/events/index.js';
import { clusterProjection, type ClusterState } from '../../src/projections/index.js';
import type { Decision } from '../../src/core/decision.js';
import { Journal } from '../../src/router/journal/journal.js';
import { createLogger } from '../../src/router/observability/logger.js';
import { RouterMetrics } from '../../src/router/observability/metrics.js';
import { registered } from '../support/events.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('router: the journal', () => {
  let log: EventLog<ClusterState>;
  let journal: Journal;
  let heard: Decision[];
  let failures: Error[];

  beforeEach(() => {
    log = EventLog.open(tempDir(), { projection: clusterProjection, clock: () => 0 });
    const metrics = new RouterMetrics({
      state: () => log.state,
      inFlight: () => 0,
      sessionsWaiting: () => 0,
    });
    failures = [];
    journal = new Journal(log, metrics, createLogger('silent'), (error) => failures.push(error));
    heard = [];
    journal.onRecorded((decision) => heard.push(decision));
  });

  afterEach(async () => {
    await log.close();
    cleanTempDirs();
  });

  it("given a decision, when it is recorded, then its events carry its cause's text", async () => {
    const decision: Decision = {
      cause: { kind: 'report', workerId: 'w1' },
      events: [registered('w1')],
    };
    await journal.record(decision).committed;
    expect([...log.read()].map((event) => [event.seq, event.type, event.cause])).to.deep.equal([
      [1, 'WorkerRegistered', 'report:w1'],
    ]);
    expect(heard).to.deep.equal([decision]);
  });

  it('given a decision with no events, when it is recorded, then nothing is appended or told', async () => {
    await journal.record({ cause: { kind: 'reaper' }, events: [registered('w1')] }).committed;
    const appended = journal.record({ cause: { kind: 'reaper' }, events: [] });
    await appended.committed;
    await appended.durable;
    expect(appended.events).to.deep.equal([]);
    expect(log.lastSeq).to.equal(1);
    expect(heard).to.have.length(1);
  });

  it('given a stopped journal, when a decision with no events is recorded, then it is not refused', async () => {
    journal.stop(new Error('lease lost'));
    expect(journal.failed).to.equal(true);
    await journal.record({ cause: { kind: 'routing' }, events: [] }).committed;
    expect(() =>
      journal.record({ cause: { kind: 'routing' }, events: [registered('w1')] }),
    ).to.throw(/the router must restart/);
    expect(log.lastSeq).to.equal(0);
  });
});
