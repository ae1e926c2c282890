/**
 * Rules v10's image cost gives the same answer whichever walk placement takes (the ranked index
 * with `PlacementCaches`, the full walk without, the explaining walk), and that answer is the
 * filter-passing worker of lowest image cost, ties to the ranking, as the explanation's own
 * per-worker costs say: on random clusters of cpu and gpu workers, random catalogues, random
 * holders and build times, and random calls.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { Catalogue, NewEvent } from '../../src/events/index.js';
import { validateEvent } from '../../src/events/index.js';
import {
  compareWorkers,
  explainPlacement,
  place,
  PlacementCaches,
  type Budget,
  type CallToPlace,
  type WorkerExplanation,
} from '../../src/core/placement/index.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import { demand, GiB } from '../support/events.js';
import { prng, stamped, syntheticLog } from '../support/synthetic-log.js';

const KEYS = ['a1', 'b2', 'c3', 'd4'].map((k) => k.repeat(32));
const MODULES = ['numpy', 'torch', 'pandas'];

/** A catalogue whose covers compete with builds of 0 to 5 s; sometimes without gpu. */
function catalogueOf(random: () => number): Catalogue {
  const cost = (most: number) => Math.floor(random() * most);
  const flavors: Catalogue['flavors'] = {
    cpu: {
      coldStartCost: 500 + cost(1500),
      basePackages: [],
      checkpoints: [
        { id: 'base', modules: [], restoreCost: cost(200) },
        { id: 'np', modules: ['numpy'], restoreCost: cost(600) },
      ],
    },
  };
  if (random() < 0.7) {
    flavors.gpu = {
      coldStartCost: 500 + cost(3000),
      basePackages: [],
      checkpoints: [{ id: 'torch', modules: ['torch', 'numpy'], restoreCost: cost(800) }],
    };
  }
  return {
    flavors,
    importCosts: { numpy: cost(300), torch: cost(4000) },
    defaultImportCost: cost(200),
  };
}

/** The synthetic log with a random catalogue, and images built on its workers now and then. */
function* withImages(seed: number, workers: number): Generator<NewEvent> {
  const random = prng(seed ^ 0x5eed);
  for (const event of syntheticLog({ seed, events: 250, workers })) {
    yield event;
    if (event.type === 'CatalogueLoaded' && random() < 0.85) {
      yield { type: 'CatalogueLoaded', revision: 'r2', catalogue: catalogueOf(random) };
    }
    if (event.type === 'WorkerRegistered' && random() < 0.4) {
      yield {
        type: 'ImageBuilt',
        workerId: event.workerId,
        tenantId: 't',
        imageId: `${event.workerId.length}${'e'.repeat(63)}`,
        bytes: 1024,
        buildMs: random() < 0.2 ? 0 : Math.floor(random() * 5000),
        declarations: [KEYS[Math.floor(random() * 3)] as string],
      };
    }
  }
}

/** The worker the explanation's costs make best (what every walk must choose). */
function cheapestOf(
  state: ClusterState,
  workers: readonly WorkerExplanation[],
  build: number | null,
  budget: Budget,
) {
  const costed = workers.filter((worker) => worker.imageCost !== undefined);
  const value = (worker: WorkerExplanation) => worker.imageCost!.total ?? worker.imageCost!.cover;
  costed.sort((a, b) => {
    if (build === null && a.imageCost!.held !== b.imageCost!.held)
      return a.imageCost!.held ? -1 : 1;
    const difference = value(a) - value(b);
    if (difference !== 0) return difference;
    return compareWorkers(state.workers.get(a.workerId)!, state.workers.get(b.workerId)!, budget);
  });
  return costed[0]?.workerId;
}

describe('core: the image cost gives one answer on every walk (rules v10)', () => {
  it('ranked walk, full walk and explaining walk choose the worker of lowest image cost', () => {
    // The cases the walks may answer differently in, counted so the runs are known to meet them.
    const seen = { builderOverHolder: 0, gpuForCpuCall: 0, noHolder: 0 };
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 2, max: 30 }), (seed, workers) => {
        const random = prng(seed ^ 0xca11);
        const caches = new PlacementCaches();
        let state: ClusterState = initialState();
        let compared = 0;
        for (const raw of stamped(withImages(seed, workers))) {
          const event = validateEvent(raw);
          if (event.type === 'CallRequested') {
            const gpu = random() < 0.2;
            const call: CallToPlace = {
              requestId: event.requestId,
              sessionId: null,
              tenantId: 't',
              demand: demand({
                gpu,
                memory: random() < 0.5 ? null : Math.floor(random() * 8) * GiB,
                imports: MODULES.filter(() => random() < 0.4),
              }),
              imageKey: KEYS[Math.floor(random() * KEYS.length)],
            };
            const ranked = place(state, call, { caches });
            const all = place(state, call);
            const explained = explainPlacement(state, call);
            const at = `seq ${event.seq}`;
            expect(ranked, at).to.deep.equal(all);
            expect(explained.decision, at).to.deep.equal(all);
            if (all.outcome === 'placed') {
              const { workers: explainedWorkers, image, budget } = explained;
              const best = cheapestOf(state, explainedWorkers, image?.buildCost ?? null, budget);
              expect(all.workerId, at).to.equal(best);
              compared += 1;
              const chosen = explainedWorkers.find((worker) => worker.workerId === all.workerId);
              const holderPassed = explainedWorkers.some((worker) => worker.imageCost?.held);
              if (holderPassed && chosen?.imageCost?.held === false) seen.builderOverHolder += 1;
              if (!gpu && chosen?.flavor === 'gpu') seen.gpuForCpuCall += 1;
              if (!holderPassed && chosen?.rank === 1) seen.noHolder += 1;
            }
          }
          state = applyInPlace(state, event, caches);
        }
        expect(compared).to.be.greaterThan(0);
      }),
      { numRuns: 60 },
    );
    expect(seen.builderOverHolder, JSON.stringify(seen)).to.be.greaterThan(0);
    expect(seen.gpuForCpuCall, JSON.stringify(seen)).to.be.greaterThan(0);
    expect(seen.noHolder, JSON.stringify(seen)).to.be.greaterThan(0);
  });
});
