import { expect } from 'chai';
import fc from 'fast-check';
import { validateEvent } from '../../src/events/index.js';
import { fold } from '../../src/projections/index.js';
import { budgetOf, compareWorkers, FILTERS, Verdict } from '../../src/router/placement/index.js';
import { firstFailure } from '../../src/router/placement/filters/index.js';
import { BestWorker } from '../../src/router/placement/ranking/index.js';
import { demand, GiB } from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

describe('placement hot path', () => {
  it('agrees with the filter and ranking registries on random clusters and budgets', () => {
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
          const best = new BestWorker(budget);
          const eligible = [];
          for (const worker of state.workers.values()) {
            const registry = FILTERS.findIndex(
              (filter) => filter.check(worker, budget, state.config) === Verdict.fail,
            );
            expect(firstFailure(worker, budget, state.config), worker.workerId).to.equal(registry);
            if (registry < 0) {
              best.offer(worker);
              eligible.push(worker);
            }
          }
          eligible.sort((a, b) => compareWorkers(a, b, budget));
          expect(best.worker?.workerId).to.equal(eligible[0]?.workerId);
        },
      ),
      { numRuns: 300 },
    );
  });
});
