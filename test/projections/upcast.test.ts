/**
 * Logs written before every consequence was an event (schema v1) fold, through the upcaster
 * (src/events/upcast.ts), to the very state the v1 fold gave them after every event: the fold as
 * it was is kept as the reference (test/support/v1-fold.ts). Every fixture, as recorded, in the
 * v1 vocabulary alone and with its consequence events taken out; synthetic logs, with and without
 * full reports, restarts and snapshots; and one of 200,000 events.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { Draft } from 'immer';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { decodeEvent, validateEvent, type ClusterEvent } from '../../src/events/index.js';
import {
  applyInPlace,
  initialState,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import { place } from '../../src/core/placement/index.js';
import { history, registered, requested } from '../support/events.js';
import { readEvents, ROOT } from '../support/replay.js';
import { pinnedCall, residency, revised, routerWithVersions } from '../support/routing.js';
import { stamped, syntheticLog, type SyntheticLogOptions } from '../support/synthetic-log.js';
import { applyEventV1 } from '../support/v1-fold.js';
import { isV1Event, toV1 } from '../support/v1-vocabulary.js';

const FIXTURES = join(ROOT, 'fixtures');
/** The fixtures recorded in the v1 vocabulary (no `RouterStarted` records a schema version). */
const fixtures = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('.jsonl') && !file.endsWith('.expected.jsonl'))
  .map((file) => file.slice(0, -'.jsonl'.length))
  .filter((name) =>
    readEvents(join(FIXTURES, `${name}.jsonl`)).every(
      (event) => event.type !== 'RouterStarted' || event.schemaVersion === null,
    ),
  )
  .sort();

/**
 * A state as text, its maps as their entries in order (the order forgetting and eviction read),
 * without admission's index (derived: the v1 fold keeps none; test/projections/admission-index
 * checks it against the records).
 */
function canonical(state: ClusterState): string {
  const { admission: _index, ...records } = state;
  return JSON.stringify(records, (_key, value: unknown) =>
    value instanceof Map ? { entries: [...(value as Map<unknown, unknown>)] } : value,
  );
}

/**
 * Folds `events` with the v1 fold and with today's, comparing the states after every event (or
 * every `every` events, and after the last). Returns how many states were compared.
 */
function expectSameStates(events: readonly ClusterEvent[], every = 1): number {
  let v1 = initialState() as Draft<ClusterState>;
  let now = initialState();
  let compared = 0;
  events.forEach((event, i) => {
    v1 = applyEventV1(v1, event);
    now = applyInPlace(now, event);
    if (i % every !== every - 1 && i !== events.length - 1) return;
    const expected = canonical(v1);
    const actual = canonical(now);
    if (actual !== expected) {
      // The first field that differs, for the message.
      expect(JSON.parse(actual), `after seq ${event.seq} (${event.type})`).to.deep.equal(
        JSON.parse(expected),
      );
    }
    compared += 1;
  });
  return compared;
}

function synthetic(options: SyntheticLogOptions): ClusterEvent[] {
  return [...stamped(syntheticLog(options))].map((raw) => validateEvent(raw));
}

/** The log without the consequence events a v1 router appended: the causes alone. */
function causesAlone(events: readonly ClusterEvent[]): ClusterEvent[] {
  return events.filter(
    (event) =>
      event.type !== 'SessionExpired' &&
      !(event.type === 'SessionUnpinned' && event.reason !== 'container_unavailable') &&
      !(event.type === 'ContainerStateChanged' && event.state === 'removed'),
  );
}

describe('v1 logs through the upcaster: the state after every event is the v1 fold’s', () => {
  for (const name of fixtures) {
    it(`fixture ${name}: as recorded, in the v1 vocabulary, and with its causes alone`, () => {
      const events = readEvents(join(FIXTURES, `${name}.jsonl`));
      expect(expectSameStates(events)).to.equal(events.length);
      const v1 = events.filter(isV1Event).map((event) => decodeEvent(JSON.stringify(toV1(event))));
      expectSameStates(v1);
      expectSameStates(causesAlone(events));
    });
  }

  it('a fixture whose session ends by what its fold implies expires it at the cause’s seq', () => {
    // The eviction at seq 12 alone (its SessionExpired at 13 taken out) still ended s1 at 12.
    const events = causesAlone(
      readEvents(join(FIXTURES, 'session-expired-after-eviction.jsonl')),
    ).filter((event) => event.seq <= 13);
    let state = initialState();
    for (const event of events) state = applyInPlace(state, event);
    expect(state.sessions.get('s1')?.expired).to.deep.equal({
      reason: 'worker_evicted',
      at: events.find((event) => event.seq === 12)?.at,
      seq: 12,
    });
  });

  it('a tenant session whose worker is evicted keeps its resolution until its logged SessionExpired, as in v1', () => {
    const given = history(
      ...routerWithVersions(),
      registered('w1'),
      revised(1, 't1', 'policy-v1', 1),
      residency('w1', 'policy-v1', 'resident'),
    );
    const call = pinnedCall('r1', 't1', { sessionId: 's1' });
    given.add(requested('r1', { sessionId: 's1', tenantId: 't1', demand: call.demand }));
    given.add(...place(given.state(), call).events);
    given.add(
      { type: 'CallBound', requestId: 'r1', containerId: 'c1', checkpointId: 'policy-v1' },
      {
        type: 'SessionPinned',
        sessionId: 's1',
        workerId: 'w1',
        containerId: 'c1',
        requestId: 'r1',
        checkpointId: 'policy-v1',
      },
      { type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' },
    );
    const evicted = given.state();
    expect(evicted.sessions.get('s1')?.expired?.seq).to.equal(given.lastSeq);
    expect(evicted.routing.sessions.has('s1'), 'resolution kept').to.equal(true);
    given.add({
      type: 'SessionExpired',
      sessionId: 's1',
      reason: 'worker_evicted',
      causeSeq: null,
    });
    expect(given.state().routing.sessions.has('s1'), 'resolution dropped').to.equal(false);
    expect(expectSameStates(given.events)).to.equal(given.events.length);
  });

  it('synthetic logs: calls, sessions, evictions, and with full reports and restarts whose consequences they leave out', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 50, max: 600 }),
        fc.integer({ min: 1, max: 8 }),
        fc.boolean(),
        fc.boolean(),
        (seed, length, workers, reports, overlappingSessionCalls) => {
          const events = synthetic({
            seed,
            events: length,
            workers,
            reports,
            overlappingSessionCalls,
          });
          expectSameStates(events);
          expectSameStates(causesAlone(events));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a synthetic log from a Snapshot of a v1 prefix on', () => {
    fc.assert(
      fc.property(fc.integer(), fc.double({ min: 0, max: 1, noNaN: true }), (seed, where) => {
        const events = synthetic({ seed, events: 400, workers: 5, reports: true });
        const cut = Math.max(1, Math.floor(where * events.length));
        let prefix = initialState();
        for (const event of events.slice(0, cut)) prefix = applyInPlace(prefix, event);
        const snapshot = validateEvent({
          seq: cut,
          at: events[cut - 1]?.at,
          type: 'Snapshot',
          schemaVersion: 1,
          state: snapshotOf(prefix),
        });
        expectSameStates([snapshot, ...events.slice(cut)]);
      }),
      { numRuns: 40 },
    );
  });

  it('a synthetic log of 200,000 events over 200 workers, with full reports and restarts', function () {
    this.timeout(120_000);
    const events = synthetic({ seed: 27, events: 200_000, workers: 200, reports: true });
    expect(events.length).to.be.at.least(200_000);
    const implied = (type: ClusterEvent['type']) => events.filter((e) => e.type === type).length;
    // The log leans on what its fold implies: full reports and restarts with no consequence.
    expect(implied('WorkerUtilization')).to.be.greaterThan(1_000);
    expect(expectSameStates(events, 1_000)).to.equal(Math.ceil(events.length / 1_000));
  });
});
