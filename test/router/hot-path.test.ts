import { expect } from 'chai';
import fc from 'fast-check';
import { validateEvent } from '../../src/events/index.js';
import type { ClusterEvent, NewEvent } from '../../src/events/index.js';
import { applyInPlace, evolve, fold, initialState } from '../../src/projections/index.js';
import { isPlaceable, type ClusterState, type WorkerRecord } from '../../src/projections/index.js';
import { scanAll, scanInRankOrder } from '../../src/core/placement/scan.js';
import {
  budgetOf,
  CandidateIndex,
  compareWorkers,
  FILTERS,
  place,
  PlacementCaches,
  RANK_TERMS,
  Verdict,
  type Budget,
  type CallToPlace,
  type RankedCandidates,
} from '../../src/core/placement/index.js';
import { firstFailure } from '../../src/core/placement/filters/index.js';
import { atOf, demand, GiB, registered, utilization } from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

/** The workers of `candidates`, best first. */
function rankOrder(candidates: RankedCandidates): string[] {
  return Array.from({ length: candidates.length }, (_, i) => candidates.at(i).worker.workerId);
}

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

  it('ranking terms read only the worker fields they declare', () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 20, max: 200 }), (seed, length) => {
        const state = fold(
          [...stamped(syntheticLog({ seed, events: length, workers: 6 }))].map((e) =>
            validateEvent(e),
          ),
        );
        for (const worker of state.workers.values()) {
          for (const term of RANK_TERMS) {
            const read = new Set<PropertyKey>();
            const watched = new Proxy(worker, {
              get: (target, field, receiver) => {
                read.add(field);
                return Reflect.get(target, field, receiver) as unknown;
              },
            });
            for (const gpuCall of [false, true]) {
              term.value(watched, { memory: 0, gpuMemory: 0, gpuCall });
            }
            const undeclared = [...read].filter(
              (field) => !(term.reads as readonly PropertyKey[]).includes(field),
            );
            expect(undeclared, term.name).to.deep.equal([]);
          }
        }
      }),
      { numRuns: 50 },
    );
  });

  const modes = {
    'immutable states (evolve)': (state: ClusterState, event: ClusterEvent) => evolve(state, event),
    'a working copy changed in place, the index its change sink (the event log and replay)': (
      state: ClusterState,
      event: ClusterEvent,
      index: CandidateIndex,
    ) => applyInPlace(state, event, index),
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
          const index = new CandidateIndex();
          let state: ClusterState = initialState();
          let compared = 0;
          for (const event of stamped(syntheticLog({ seed, events: 400, workers }))) {
            state = step(state, validateEvent(event), index);
            if (event.type !== 'CallRequested' && event.type !== 'WorkerEvicted') continue;
            for (const wanted of budgets) {
              const budget = budgetOf(wanted, state.config);
              const full = referenceScan(state, budget);
              const walked = scanInRankOrder(index.candidates(state.workers), budget, state.config);
              const once = scanAll(state.workers.values(), budget, state.config);
              for (const [how, result] of [
                ['walked', walked],
                ['one full walk', once],
              ] as const) {
                expect(result.best?.workerId, `${how}, seq ${String(event.seq)}`).to.equal(
                  full.best?.workerId,
                );
                expect(result.candidates, how).to.equal(full.candidates);
                if (!full.best) expect(result.failures, how).to.deep.equal(full.failures);
              }
              compared += 1;
            }
          }
          expect(compared).to.be.greaterThan(0);
        }),
        { numRuns: 60 },
      );
    });
  }

  it('decides exactly the same with caches as without, call after call', () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 2, max: 30 }), (seed, workers) => {
        const caches = new PlacementCaches();
        let state: ClusterState = initialState();
        let decided = 0;
        for (const raw of stamped(syntheticLog({ seed, events: 300, workers }))) {
          const event = validateEvent(raw);
          if (event.type === 'CallRequested') {
            const call: CallToPlace = {
              requestId: event.requestId,
              sessionId: event.sessionId,
              demand: event.demand,
            };
            expect(place(state, call, { caches }), `seq ${event.seq}`).to.deep.equal(
              place(state, call),
            );
            decided += 1;
          }
          state = applyInPlace(state, event, caches);
        }
        expect(decided).to.be.greaterThan(0);
      }),
      { numRuns: 40 },
    );
  });

  it("gives the full scan's answer when it jumps between unrelated states", () => {
    const states = [1, 2, 3].map((seed) =>
      fold(
        [...stamped(syntheticLog({ seed, events: 600, workers: 30 }))].map((e) => validateEvent(e)),
      ),
    );
    const index = new CandidateIndex();
    const budget = budgetOf(demand({ memory: 2 * GiB }), states[0]!.config);
    for (const state of [...states, ...states.reverse(), states[1]!]) {
      const full = referenceScan(state, budget);
      const walked = scanInRankOrder(index.candidates(state.workers), budget, state.config);
      expect(walked.best?.workerId).to.equal(full.best?.workerId);
      expect(walked.candidates).to.equal(full.candidates);
    }
  });

  it('misses no change however many workers change between two decisions', () => {
    const index = new CandidateIndex();
    let state: ClusterState = initialState();
    let seq = 0;
    const apply = (event: NewEvent) => {
      seq += 1;
      state = applyInPlace(state, validateEvent({ seq, at: atOf(seq), ...event }), index);
    };
    const ids = Array.from({ length: 50 }, (_, i) => `w${String(i).padStart(2, '0')}`);
    for (const id of ids) apply(registered(id));
    const budget = budgetOf(demand({}), state.config);
    const order = () => rankOrder(index.candidates(state.workers));
    expect(order()).to.deep.equal(ids);
    // Every worker changes many times before the next decision; the fullest ends up first-emptiest.
    for (let round = 0; round < 100; round += 1) {
      ids.forEach((id, i) => apply(utilization(id, { memoryUsed: ((i + round) % 16) * GiB })));
    }
    ids.forEach((id, i) =>
      apply(utilization(id, { memoryUsed: (ids.length - i) * 100 * 2 ** 20 })),
    );
    expect(order()).to.deep.equal([...ids].reverse());
    const full = referenceScan(state, budget);
    expect(scanInRankOrder(index.candidates(state.workers), budget, state.config).best?.workerId)
      .to.equal(full.best?.workerId)
      .and.to.equal('w49');
  });

  it('rebuilds when a worker appears that the fold never reported (folded without the index)', () => {
    const index = new CandidateIndex();
    let state: ClusterState = initialState();
    let seq = 0;
    const apply = (event: NewEvent, sink?: CandidateIndex) => {
      seq += 1;
      state = applyInPlace(state, validateEvent({ seq, at: atOf(seq), ...event }), sink);
    };
    apply(registered('w2'), index);
    expect(rankOrder(index.candidates(state.workers))).to.deep.equal(['w2']);
    apply(registered('w1'));
    expect(rankOrder(index.candidates(state.workers))).to.deep.equal(['w1', 'w2']);
  });
});
