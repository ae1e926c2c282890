/**
 * Given / when / then tests of placement's filters: one registry owns their order, the hot path's
 * walk follows it, and each filter says why in the same pass as its check, with the same verdict
 * whether or not it is asked why.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import {
  budgetOf,
  FILTERS,
  Verdict,
  type Budget,
  type FilterStatus,
} from '../../src/core/placement/index.js';
import { explainFilters, firstFailure } from '../../src/core/placement/filters/index.js';
import { validateEvent } from '../../src/events/index.js';
import { fold, type ClusterState, type WorkerRecord } from '../../src/projections/index.js';
import {
  demand,
  GiB,
  history,
  placed,
  registered,
  requested,
  utilization,
} from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

/** Every filter's [name, verdict, reason] on `workerId` for a call of `budget`. */
function verdicts(state: ClusterState, workerId: string, budget: Budget) {
  const worker = state.workers.get(workerId)!;
  return explainFilters(worker, budget, state.config).map(({ filter, verdict, reason }) => [
    filter.name,
    verdict,
    reason,
  ]);
}

describe('core: placement filters', () => {
  // cpu1: 4 GiB in use and one call of 1 GiB in flight; gpu1: 12 of 16 GiB of GPU memory in use,
  // no memory total and no container limit; full: its own count says 3 containers, of 2.
  const state = history(
    registered('cpu1'),
    utilization('cpu1', { memoryUsed: 4 * GiB }),
    requested('r1'),
    placed('r1', 'cpu1'),
    registered('gpu1', {
      flavor: 'gpu',
      gpuMemoryTotal: 16 * GiB,
      maxContainers: null,
      memoryTotal: null,
    }),
    utilization('gpu1', { gpuMemoryUsed: 12 * GiB }),
    registered('full', { maxContainers: 2 }),
    utilization('full', { containerCount: 3 }),
  ).state();
  const cpuCall = (memory: number) => budgetOf(demand({ memory }), state.config);
  const gpuCall = (gpuMemory: number) => budgetOf(demand({ gpuMemory }), state.config);

  it('given a CPU call, then each filter says why it passes, fails or skips, from its own arithmetic', () => {
    expect(verdicts(state, 'cpu1', cpuCall(8 * GiB))).to.deep.equal([
      ['flavor', Verdict.skip, 'cpu call: any flavor will do (worker is cpu)'],
      [
        'memory-headroom',
        Verdict.pass,
        'in use 4GiB + reserved 1GiB + budget 8GiB = 13GiB <= 14.40GiB (90% of 16GiB)',
      ],
      ['gpu-memory-headroom', Verdict.skip, 'skipped: the call has no GPU memory budget'],
      ['container-count', Verdict.pass, '1 in flight + 0 idle = 1 < max 8'],
    ]);
    expect(verdicts(state, 'cpu1', cpuCall(10 * GiB))[1]).to.deep.equal([
      'memory-headroom',
      Verdict.fail,
      'in use 4GiB + reserved 1GiB + budget 10GiB = 15GiB exceeds 14.40GiB (90% of 16GiB)',
    ]);
    expect(verdicts(state, 'full', cpuCall(GiB))[3]).to.deep.equal([
      'container-count',
      Verdict.fail,
      "0 in flight + 0 idle = 0; by the worker's own count 3, not below max 2",
    ]);
    expect(verdicts(state, 'gpu1', cpuCall(GiB))).to.deep.equal([
      ['flavor', Verdict.skip, 'cpu call: any flavor will do (worker is gpu)'],
      ['memory-headroom', Verdict.skip, 'skipped: the worker reported no memory total'],
      ['gpu-memory-headroom', Verdict.skip, 'skipped: the call has no GPU memory budget'],
      ['container-count', Verdict.skip, 'skipped: the worker reported no container limit'],
    ]);
  });

  it('given a GPU call, then flavor and GPU memory say why', () => {
    expect(verdicts(state, 'cpu1', gpuCall(2 * GiB)).slice(0, 3)).to.deep.equal([
      ['flavor', Verdict.fail, 'gpu call needs a gpu worker; this one is cpu'],
      [
        'memory-headroom',
        Verdict.pass,
        'in use 4GiB + reserved 1GiB + budget 1GiB = 6GiB <= 14.40GiB (90% of 16GiB)',
      ],
      ['gpu-memory-headroom', Verdict.skip, 'skipped: the worker offers no GPU memory'],
    ]);
    expect(verdicts(state, 'gpu1', gpuCall(2 * GiB)).slice(0, 3)).to.deep.equal([
      ['flavor', Verdict.pass, 'gpu call on a gpu worker'],
      ['memory-headroom', Verdict.skip, 'skipped: the worker reported no memory total'],
      [
        'gpu-memory-headroom',
        Verdict.pass,
        'GPU in use 12GiB + budget 2GiB = 14GiB <= 14.40GiB (90% of 16GiB)',
      ],
    ]);
    expect(verdicts(state, 'gpu1', gpuCall(4 * GiB))[2]).to.deep.equal([
      'gpu-memory-headroom',
      Verdict.fail,
      'GPU in use 12GiB + budget 4GiB = 16GiB exceeds 14.40GiB (90% of 16GiB)',
    ]);
  });

  it('when asked why, a filter gives the verdict it gives unasked, and the walk stops where the registry says', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 20, max: 200 }),
        fc.integer({ min: 0, max: 16 }),
        fc.integer({ min: 0, max: 20 }),
        (seed, length, memory, gpuMemory) => {
          const folded = fold(
            [...stamped(syntheticLog({ seed, events: length, workers: 6 }))].map((e) =>
              validateEvent(e),
            ),
          );
          const budget = budgetOf(
            demand({ memory: memory * GiB, gpuMemory: gpuMemory === 0 ? null : gpuMemory * GiB }),
            folded.config,
          );
          for (const record of folded.workers.values()) {
            // The same worker with GPU memory, and with the worker's own count above its limit.
            const workers: WorkerRecord[] = [
              record,
              { ...record, gpuMemoryTotal: 16 * GiB },
              { ...record, reportedSlots: 9 },
            ];
            for (const worker of workers) {
              const explained = explainFilters(worker, budget, folded.config);
              FILTERS.forEach((filter, i) => {
                const status: FilterStatus = { reason: '' };
                const asked = filter.check(worker, budget, folded.config, status);
                expect(asked, filter.name).to.equal(filter.check(worker, budget, folded.config));
                expect(explained[i]?.verdict).to.equal(asked);
                expect(status.reason, filter.name).to.not.equal('');
              });
              expect(firstFailure(worker, budget, folded.config)).to.equal(
                explained.findIndex(({ verdict }) => verdict === Verdict.fail),
              );
            }
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});
