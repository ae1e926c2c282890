import { expect } from 'chai';
import fc from 'fast-check';
import { validateEvent } from '../../src/events/index.js';
import type { ClusterEvent, NewEvent } from '../../src/events/index.js';
import {
  clusterProjection,
  evolve,
  fold,
  initialState,
  noteWorkerChange,
  watchWorkers,
  type WorkerChanges,
} from '../../src/projections/index.js';
import { isPlaceable, type ClusterState, type WorkerRecord } from '../../src/projections/index.js';
import { CandidateOrder } from '../../src/core/placement/candidate-order.js';
import { scanInRankOrder } from '../../src/core/placement/scan.js';
import {
  budgetOf,
  compareWorkers,
  FILTERS,
  Verdict,
  type Budget,
} from '../../src/core/placement/index.js';
import { firstFailure } from '../../src/core/placement/filters/index.js';
import { atOf, demand, GiB, registered, utilization } from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

/**
 * Rules 2 to 4 straight from the registries: every candidate, every filter, sorted by
 * `compareWorkers`. What the hot path must agree with.
 */
function referenceScan(state: ClusterState, budget: Budget) {
  const failures = FILTERS.map(() => 0);
  const eligible: WorkerRecord[] = [];
  const candidates = [...state.workers.values()].filter(isPlaceable);
  for (const worker of candidates) {
    const failed = FILTERS.findIndex(
      (filter) => filter.check(worker, budget, state.config) === Verdict.fail,
    );
    if (failed < 0) eligible.push(worker);
    else failures[failed] = (failures[failed] ?? 0) + 1;
  }
  eligible.sort((a, b) => compareWorkers(a, b, budget));
  return { best: eligible[0], candidates: candidates.length, failures };
}

describe('placement hot path', () => {
  it('firstFailure agrees with the filter registry on random clusters and budgets', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 20, max: 300 }),
        fc.option(
          fc.integer({ min: 0, max: 16 }).map((g) => g * GiB),
          { nil: null },
        ),
        fc.option(
          fc.integer({ min: 0, max: 4 }).map((g) => g * GiB),
          { nil: null },
        ),
        fc.option(fc.boolean(), { nil: null }),
        (seed, length, memory, gpuMemory, gpu) => {
          const state = fold(
            [...stamped(syntheticLog({ seed, events: length, workers: 8 }))].map((e) =>
              validateEvent(e),
            ),
          );
          const budget = budgetOf(demand({ memory, gpuMemory, gpu }), state.config);
          for (const worker of state.workers.values()) {
            const registry = FILTERS.findIndex(
              (filter) => filter.check(worker, budget, state.config) === Verdict.fail,
            );
            expect(firstFailure(worker, budget, state.config), worker.workerId).to.equal(registry);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  const modes = {
    'immutable states (evolve)': evolve,
    'a working copy changed in place (the event log and replay)': (
      state: ClusterState,
      event: ClusterEvent,
    ) => clusterProjection.apply(state, event),
  };
  for (const [mode, step] of Object.entries(modes)) {
    it(`walks the candidates best first to the full scan's answer, state after state: ${mode}`, () => {
      const budgets = [
        demand({}),
        demand({ memory: 12 * GiB }),
        demand({ gpu: true }),
        demand({ gpuMemory: 2 * GiB, memory: 6 * GiB }),
      ];
      fc.assert(
        fc.property(fc.integer(), fc.integer({ min: 2, max: 40 }), (seed, workers) => {
          const order = new CandidateOrder();
          let state: ClusterState = initialState();
          let compared = 0;
          for (const event of stamped(syntheticLog({ seed, events: 400, workers }))) {
            state = step(state, validateEvent(event));
            if (event.type !== 'CallRequested' && event.type !== 'WorkerEvicted') continue;
            for (const wanted of budgets) {
              const budget = budgetOf(wanted, state.config);
              const full = referenceScan(state, budget);
              const walked = scanInRankOrder(order.of(state.workers), budget, state.config);
              expect(walked.best?.workerId, `seq ${String(event.seq)}`).to.equal(
                full.best?.workerId,
              );
              expect(walked.candidates).to.equal(full.candidates);
              if (!full.best) expect(walked.failures).to.deep.equal(full.failures);
              compared += 1;
            }
          }
          expect(compared).to.be.greaterThan(0);
        }),
        { numRuns: 60 },
      );
    });
  }

  it("gives the full scan's answer when it jumps between unrelated states", () => {
    const states = [1, 2, 3].map((seed) =>
      fold(
        [...stamped(syntheticLog({ seed, events: 600, workers: 30 }))].map((e) => validateEvent(e)),
      ),
    );
    const order = new CandidateOrder();
    const budget = budgetOf(demand({ memory: 2 * GiB }), states[0]!.config);
    for (const state of [...states, ...states.reverse(), states[1]!]) {
      const full = referenceScan(state, budget);
      const walked = scanInRankOrder(order.of(state.workers), budget, state.config);
      expect(walked.best?.workerId).to.equal(full.best?.workerId);
      expect(walked.candidates).to.equal(full.candidates);
    }
  });

  it('rebuilds when the journal overflowed between two decisions, missing no change', () => {
    const order = new CandidateOrder();
    let state: ClusterState = clusterProjection.initial();
    let seq = 0;
    const apply = (event: NewEvent) => {
      seq += 1;
      state = clusterProjection.apply(state, validateEvent({ seq, at: atOf(seq), ...event }));
    };
    for (const id of ['w1', 'w2', 'w3']) apply(registered(id));
    apply(utilization('w2', { memoryUsed: 8 * GiB }));
    const budget = budgetOf(demand({}), state.config);
    expect(scanInRankOrder(order.of(state.workers), budget, state.config).best?.workerId).to.equal(
      'w1',
    );
    // w1 changes more often than the journal holds; only then does w3 change (it becomes busy).
    for (let i = 0; i < 5_000; i += 1) apply(utilization('w1', { memoryUsed: 4 * GiB }));
    apply(utilization('w3', { memoryUsed: 12 * GiB }));
    const full = referenceScan(state, budget);
    const walked = scanInRankOrder(order.of(state.workers), budget, state.config);
    expect(walked.best?.workerId).to.equal('w1');
    expect(order.of(state.workers).map((worker) => worker.workerId)).to.deep.equal([
      'w1',
      'w2',
      'w3',
    ]);
    expect(walked.best?.workerId).to.equal(full.best?.workerId);
  });

  it('journals the workers a working copy changes, for every watcher, until it overflows', () => {
    let state: ClusterState = clusterProjection.initial();
    const first: WorkerChanges = { ids: [], overflowed: false };
    const second: WorkerChanges = { ids: [], overflowed: false };
    watchWorkers(state.workers, first);
    watchWorkers(state.workers, second);
    const events = [...stamped(syntheticLog({ seed: 9, events: 30, workers: 3 }))];
    for (const event of events) state = clusterProjection.apply(state, validateEvent(event));
    expect(first.ids).to.not.be.empty;
    expect(second.ids).to.deep.equal(first.ids);
    for (let i = 0; i < 5000; i += 1) noteWorkerChange(state.workers, 'w1');
    expect(first.overflowed).to.equal(true);
    watchWorkers(state.workers, first);
    expect([first.ids, first.overflowed]).to.deep.equal([[], false]);
    // Watching another map stops the journal of the first one.
    watchWorkers(new Map(), first);
    noteWorkerChange(state.workers, 'w2');
    expect(first.ids).to.deep.equal([]);
  });
});
