import { expect } from 'chai';
import fc from 'fast-check';
import { validateEvent, type Catalogue } from '../../src/events/index.js';
import { fold } from '../../src/projections/index.js';
import { explainPlacement, place } from '../../src/core/placement/index.js';
import { demand, GiB, history, placed, registered, utilization } from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy'],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        { id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 },
      ],
    },
  },
  importCosts: { numpy: 150 },
  defaultImportCost: 100,
};

describe('placement explanations', () => {
  it('lists every worker with its filters, reasons and ranking key, the cost table and dropped packages', () => {
    const given = history(
      { type: 'CatalogueLoaded', revision: 'r7', catalogue: CATALOGUE },
      registered('w1', { memoryTotal: 10 * GiB }),
      registered('w2', { memoryTotal: 10 * GiB, maxContainers: 1 }),
      registered('w3', { status: 'error', error: 'no python' }),
      utilization('w1', { memoryUsed: 2 * GiB }),
      placed('r0', 'w2'),
    );
    const explanation = explainPlacement(given.state(), {
      requestId: 'r1',
      sessionId: null,
      demand: demand({
        memory: 2 * GiB,
        imports: ['numpy', 'scipy'],
        packages: ['numpy==1.24', 'tqdm'],
      }),
    });
    expect(explanation.decision).to.deep.include({
      outcome: 'placed',
      workerId: 'w1',
      checkpointId: 'ckpt-numpy',
    });
    const [w1, w2, w3] = explanation.workers;
    expect(w1).to.deep.include({ workerId: 'w1', eligible: true, rank: 1, notCandidate: null });
    expect(w1?.filters.find((f) => f.filter === 'memory-headroom')).to.deep.equal({
      filter: 'memory-headroom',
      verdict: 'pass',
      reason: 'in use 2GiB + reserved 0B + budget 2GiB = 4GiB <= 9GiB (90% of 10GiB)',
    });
    expect(w1?.rankKey?.terms.map((t) => t.name)).to.deep.equal([
      'flavor-penalty',
      'memory-pressure',
      'cpu-pressure',
      'in-flight',
    ]);
    expect(w2).to.deep.include({ eligible: false, rank: null });
    expect(w2?.filters.find((f) => f.verdict === 'fail')).to.deep.equal({
      filter: 'container-count',
      verdict: 'fail',
      reason: '1 in flight + 0 idle = 1, not below max 1',
    });
    expect(w3?.notCandidate).to.equal('registered with an error status: no python');
    expect(explanation.checkpoint?.rows.map((r) => [r.checkpointId, r.total])).to.deep.equal([
      ['checkpoint_0', 60 + 150 + 100],
      ['ckpt-numpy', 90 + 100],
      [null, 900 + 250],
    ]);
    expect(explanation.packages).to.deep.include({ kept: ['tqdm'], skipped: ['numpy==1.24'] });
  });

  it('always agrees with place, and ranks the chosen worker first (random states and calls)', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 10, max: 400 }),
        fc.record({
          memory: fc.option(
            fc.integer({ min: 1, max: 20 }).map((g) => g * GiB),
            { nil: null },
          ),
          gpu: fc.option(fc.boolean(), { nil: null }),
          imports: fc.option(fc.subarray(['numpy', 'torch', 'pandas']), { nil: null }),
          sessionId: fc.option(fc.constantFrom('sess-1', 'sess-2', 'sess-3', 'sess-9'), {
            nil: null,
          }),
        }),
        (seed, length, ask) => {
          const events = [...stamped(syntheticLog({ seed, events: length, workers: 6 }))].map((e) =>
            validateEvent(e),
          );
          const state = fold(events);
          const call = {
            requestId: 'probe',
            sessionId: ask.sessionId,
            demand: demand({ memory: ask.memory, gpu: ask.gpu, imports: ask.imports }),
          };
          const decision = place(state, call);
          const explanation = explainPlacement(state, call);
          expect(explanation.decision).to.deep.equal(decision);
          for (const worker of explanation.workers) {
            const failed = worker.filters.some((f) => f.verdict === 'fail');
            expect(worker.eligible, worker.workerId).to.equal(
              worker.notCandidate === null && !failed,
            );
          }
          if (decision.outcome === 'placed' && decision.containerId === null) {
            const first = explanation.workers.find((w) => w.rank === 1);
            expect(first?.workerId).to.equal(decision.workerId);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
