import { expect } from 'chai';
import fc from 'fast-check';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  EventLog,
  readJsonl,
  validateEvent,
  writeJsonl,
  type ClusterEvent,
  type JsonlEvent,
} from '../../src/events/index.js';
import {
  applyInPlace,
  clusterProjection,
  evolve,
  fold,
  initialState,
  snapshotOf,
  type ClusterState,
  type WorkerRecord,
} from '../../src/projections/index.js';
import { foldWithoutSnapshots } from '../support/events.js';
import { stamped, syntheticLog, type SyntheticLogOptions } from '../support/synthetic-log.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const logArbitrary = (maxEvents: number) =>
  fc.record({
    seed: fc.integer(),
    events: fc.integer({ min: 1, max: maxEvents }),
    workers: fc.integer({ min: 1, max: 8 }),
  });

function events(options: SyntheticLogOptions): ClusterEvent[] {
  return [...stamped(syntheticLog(options))].map((raw) => validateEvent(raw));
}

/** Every worker's counters agree with the reservations that name it. */
function expectCountersConsistent(state: ClusterState): void {
  for (const worker of state.workers.values()) {
    const held = [...state.reservations.values()].filter((r) => r.workerId === worker.workerId);
    expect(worker.inFlight, `${worker.workerId} in flight`).to.equal(held.length);
    expect(worker.reservedMemory, `${worker.workerId} reserved`).to.equal(
      held.reduce((sum, r) => sum + r.memory, 0),
    );
  }
}

/** Everything a worker's record holds, as text (its maps as their entries). */
const fieldsOf = (worker: WorkerRecord) =>
  JSON.stringify({
    ...worker,
    containers: [...worker.containers],
    pinnedSessions: [...worker.pinnedSessions],
  });

/**
 * Folds like the event log does for the router (in place, telling a change sink), checking after
 * every event that each worker whose record changed, in any field, was reported to the sink.
 */
function watchedFold(log: readonly ClusterEvent[]): ClusterState {
  const reported: string[] = [];
  const sink = { workerChanged: (workerId: string) => void reported.push(workerId) };
  let state = clusterProjection.initial();
  for (const event of log) {
    const before = new Map([...state.workers].map(([id, w]) => [id, fieldsOf(w)]));
    const workers = state.workers;
    state = applyInPlace(state, event, sink);
    reported.length = state.workers === workers ? reported.length : 0;
    if (state.workers !== workers) continue; // a Snapshot replaced the state: owners start over
    for (const [id, after] of state.workers) {
      if (before.get(id) === fieldsOf(after)) continue;
      expect(reported, `seq ${String(event.seq)}: ${id} changed but was not reported`).to.include(
        id,
      );
    }
    reported.length = 0;
  }
  return state;
}

describe('projection properties (random valid logs)', () => {
  afterEach(cleanTempDirs);

  it('fold equals evolving event by event and the watched working copy, and counters match the reservations', () => {
    fc.assert(
      fc.property(logArbitrary(150), (options) => {
        const log = events(options);
        const folded = fold(log);
        expect(folded).to.deep.equal(log.reduce(evolve, initialState()));
        expect(folded).to.deep.equal(watchedFold(log));
        expectCountersConsistent(folded);
      }),
      { numRuns: 40 },
    );
  });

  for (const overlappingSessionCalls of [false, true]) {
    it(`fold of everything equals a Snapshot of any prefix plus the tail${overlappingSessionCalls ? ', even with two calls in one container (a log the router did not write)' : ''}`, () => {
      fc.assert(
        fc.property(
          logArbitrary(400),
          fc.double({ min: 0, max: 1, noNaN: true }),
          (options, where) => {
            const log = events({ ...options, overlappingSessionCalls });
            const cut = Math.floor(where * log.length);
            const prefix = fold(log.slice(0, cut));
            const snapshot = validateEvent({
              seq: cut,
              at: log[Math.max(0, cut - 1)]?.at ?? '2026-11-30T10:00:00.000Z',
              type: 'Snapshot',
              schemaVersion: 1,
              state: snapshotOf(prefix),
            });
            expect(fold([snapshot, ...log.slice(cut)])).to.deep.equal(fold(log));
            expect(fold(log.slice(cut), prefix)).to.deep.equal(fold(log));
          },
        ),
        { numRuns: overlappingSessionCalls ? 300 : 60 },
      );
    });
  }

  it('an LMDB log with snapshots every N opens at fold(all), and folding from any snapshot gives the same', async () => {
    await fc.assert(
      fc.asyncProperty(
        logArbitrary(500),
        fc.integer({ min: 3, max: 60 }),
        async (options, every) => {
          const dir = tempDir();
          const log = EventLog.open<ClusterState>(dir, {
            projection: clusterProjection,
            snapshotEvery: every,
          });
          for (const raw of syntheticLog(options)) log.append(raw);
          await log.close();
          const reader = EventLog.open(dir, { readOnly: true });
          const all = [...reader.read()];
          const expected = foldWithoutSnapshots(all);
          const snapshotSeqs = all.filter((e) => e.type === 'Snapshot').map((e) => e.seq);
          for (const seq of snapshotSeqs) {
            expect(fold(reader.read(seq)), `from snapshot ${seq}`).to.deep.equal(expected);
          }
          await reader.close();
          const reopened = EventLog.open<ClusterState>(dir, {
            projection: clusterProjection,
            snapshotEvery: every,
          });
          expect(reopened.state).to.deep.equal(expected);
          await reopened.close();
        },
      ),
      { numRuns: 15 },
    );
  });

  it('JSONL -> LMDB -> JSONL is byte-identical', async () => {
    await fc.assert(
      fc.asyncProperty(logArbitrary(400), async (options) => {
        const dir = tempDir();
        const source = join(dir, 'in.jsonl');
        const target = join(dir, 'out.jsonl');
        writeFileSync(
          source,
          [...stamped(syntheticLog(options))].map((e) => `${JSON.stringify(e)}\n`).join(''),
        );
        const log = EventLog.open(join(dir, 'log'));
        const batch: JsonlEvent[] = [];
        for await (const event of readJsonl(source)) batch.push(event);
        await log.appendStored(batch).durable;
        await writeJsonl(log.readStored(), target);
        await log.close();
        expect(readFileSync(target).equals(readFileSync(source))).to.equal(true);
      }),
      { numRuns: 15 },
    );
  });
});
