/**
 * Given / when / then tests of placement rules v10's image cost (docs/placement.md, "Images"):
 * given workers of two flavors, a catalogue and the images they hold with the build times they
 * recorded, when a call names an image, then it goes to the filter-passing worker of lowest
 * `cover(flavor) + (holds it ? 0 : build cost)`, ties to the ranking; a log recorded under 9
 * decides as it did (the best holder, else the ranking).
 */
import { expect } from 'chai';
import type { Catalogue, NewEvent } from '../../src/events/index.js';
import {
  explainPlacement,
  IMAGE_COST_RULES_VERSION,
  PlacementCaches,
  place,
  type CallToPlace,
  type PlacedDecision,
  type PlacementDecision,
} from '../../src/core/placement/index.js';
import { decide } from '../../src/core/decisions.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import { stateFromJson, stateToJson } from '../../src/projections/snapshot.js';
import {
  demand,
  finished,
  history,
  placed,
  registered,
  requested,
  started,
} from '../support/events.js';
import { IMAGE_COSTS as COSTS } from '../../fixtures/scenarios/steps.js';
import { explainPageLines } from '../support/explain-page.js';

const KEY = 'cd'.repeat(32);
const IMAGE = 'ab'.repeat(32);
const NINE = IMAGE_COST_RULES_VERSION - 1;

function built(workerId: string, buildMs: number, bytes = 27_000): NewEvent {
  return {
    type: 'ImageBuilt',
    workerId,
    tenantId: 'acme',
    imageId: IMAGE,
    bytes,
    buildMs,
    declarations: [KEY],
  };
}

/**
 * w1 (cpu, the ranking's first for a CPU call) and g1 (gpu) under `rulesVersion`, `catalogue`
 * loaded (none: null), then `more`.
 */
function clusterLog(
  rulesVersion: number,
  catalogue: Catalogue | null,
  ...more: NewEvent[]
): NewEvent[] {
  return [
    started({ QUEUE_TIMEOUT: 600_000 }, rulesVersion),
    ...(catalogue === null
      ? []
      : [{ type: 'CatalogueLoaded', revision: 'r1', catalogue } satisfies NewEvent]),
    registered('w1', { maxContainers: 1 }),
    registered('g1', { flavor: 'gpu', maxContainers: 1 }),
    ...more,
  ];
}

function given(rulesVersion: number, catalogue: Catalogue | null, ...more: NewEvent[]) {
  return history(...clusterLog(rulesVersion, catalogue, ...more)).state();
}

/** A CPU call naming acme's image, whose imports include torch. */
function call(imageKey: string | null = KEY): CallToPlace {
  return {
    requestId: 'r1',
    sessionId: null,
    tenantId: 'acme',
    demand: demand({ imports: ['torch'] }),
    imageKey,
  };
}

function workerOf(decision: PlacementDecision): string {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return (decision as PlacedDecision).workerId;
}

/** Where every walk places `request` against `events`: the ranked index, the full walk, explain. */
function everyWalk(events: readonly NewEvent[], request: CallToPlace = call()): string {
  const state = history(...events).state();
  const caches = new PlacementCaches();
  let folded: ClusterState = initialState();
  history(...events).events.forEach((event) => (folded = applyInPlace(folded, event, caches)));
  const walks = [
    place(folded, request, { caches }),
    place(state, request),
    explainPlacement(state, request).decision,
  ].map(workerOf);
  expect(new Set(walks).size, `walks: ${walks.join(', ')}`).to.equal(1);
  return walks[0] as string;
}

describe('core: placement weighs the image cost of each worker (rules v10)', () => {
  it('given no holder, when the ranking prefers w1 but g1 has a checkpoint covering the imports, then the call goes to g1; under 9 to w1', () => {
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS))).to.equal('g1');
    expect(everyWalk(clusterLog(NINE, COSTS))).to.equal('w1');
    // A call without an image is placed by the ranking, as under 9.
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS), call(null))).to.equal('w1');
  });

  it('given w1 holds the image (cover 3,060) and its build took 1,000 ms, when g1 costs 90 + 1,000, then g1 builds it; under 9 the holder wins', () => {
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 1000)))).to.equal(
      'g1',
    );
    expect(everyWalk(clusterLog(NINE, COSTS, built('w1', 1000)))).to.equal('w1');
  });

  it('given the same holder whose build took 12,000 ms, then the holder wins (3,060 < 12,090)', () => {
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 12_000)))).to.equal(
      'w1',
    );
  });

  it('given the build cost is unknown (the holder found the image on disk: buildMs 0), then a holder that passes wins, whatever its cover', () => {
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 0)))).to.equal('w1');
    // A holder that does not pass (its one slot taken) leaves the others to compare covers: g1.
    const full = clusterLog(
      IMAGE_COST_RULES_VERSION,
      COSTS,
      built('w1', 0),
      requested('busy'),
      placed('busy', 'w1'),
    );
    expect(everyWalk(full)).to.equal('g1');
  });

  it('given a held-images report of the image (buildMs 0: found on disk), then the build time recorded before is kept', () => {
    const events = clusterLog(
      IMAGE_COST_RULES_VERSION,
      COSTS,
      built('w1', 1000),
      built('w1', 0, 28_000),
    );
    const state = history(...events).state();
    expect(state.images.get('w1')?.get(`acme\n${IMAGE}`)).to.deep.include({
      bytes: 28_000,
      buildMs: 1000,
    });
    expect(everyWalk(events)).to.equal('g1');
  });

  it('given no catalogue, then every cover is 0: the holder wins, and without one the ranking chooses (as under 8)', () => {
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, null))).to.equal('w1');
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, null, built('g1', 1000)))).to.equal('g1');
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, null, built('g1', 0)))).to.equal('g1');
  });

  it('given a call that pins its checkpoint or disables optimized execution, then every cover is 0 (the cost model chooses nothing for it): the holder, else the ranking, as under 9', () => {
    const pinned = { ...call(), demand: demand({ imports: ['torch'], checkpointId: 'ckpt-base' }) };
    const cold = {
      ...call(),
      demand: demand({ imports: ['torch'], disableOptimizedExecution: true }),
    };
    // g1's flavor does not list ckpt-base: the cover must not send the call where it is refused.
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS), pinned)).to.equal('w1');
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS), cold)).to.equal('w1');
    expect(
      everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('g1', 1000)), cold),
    ).to.equal('g1');
  });

  it('given a flavor the catalogue does not list, then its cover is the dearest listed cold start plus every import: never cheaper than a listed flavor', () => {
    const gpuOnly: Catalogue = { ...COSTS, flavors: { gpu: COSTS.flavors.gpu! } };
    // cpu: 2,000 + 3,000 against gpu's 90.
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, gpuOnly))).to.equal('g1');
    // The holder on cpu pays 5,000; g1 builds for 90 + 4,000.
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, gpuOnly, built('w1', 4000)))).to.equal(
      'g1',
    );
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, gpuOnly, built('w1', 5000)))).to.equal(
      'w1',
    );
  });

  it('given equal image costs, then the ranking decides', () => {
    // The holder's cover 3,060; g1's 90 + 2,970.
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 2970)))).to.equal(
      'w1',
    );
    expect(everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 2969)))).to.equal(
      'g1',
    );
    // Without imports g1 holds it at its cover 90, and w1, ranked first, builds it for 60 + 30:
    // the tie goes to w1, though the holder was found first.
    const noImports = { ...call(), demand: demand() };
    const tie = clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('g1', 30));
    expect(everyWalk(tie, noImports)).to.equal('w1');
    expect(
      everyWalk(clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('g1', 31)), noImports),
    ).to.equal('g1');
  });

  it('given a snapshot, then the build times are restored; one written before them loads with 0 (unknown)', () => {
    const state = given(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 1000));
    const json = stateToJson(state);
    expect(workerOf(place(stateFromJson(json), call()))).to.equal('g1');
    const old = JSON.parse(JSON.stringify(json)) as {
      images: Record<string, Record<string, unknown>[]>;
    };
    for (const images of Object.values(old.images))
      for (const image of images) delete image.buildMs;
    const restored = stateFromJson(old as unknown as typeof json);
    expect(restored.images.get('w1')?.get(`acme\n${IMAGE}`)?.buildMs).to.equal(0);
    expect(workerOf(place(restored, call()))).to.equal('w1');
  });

  it('explains the choice: the image line with both sides in parts, and each eligible worker’s image cost', () => {
    const state = given(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 12_000));
    const explanation = explainPlacement(state, call());
    expect(explanation.image).to.deep.equal({
      imageKey: KEY,
      holders: ['w1'],
      chosen: 'w1',
      buildCost: 12_000,
      reason:
        'w1 holds the image: cost 3,060 (cover 3,060); the best build elsewhere, on g1, costs 12,090 (cover 90 + build 12,000)',
    });
    expect(
      explanation.workers.map((worker) => [worker.workerId, worker.rank, worker.imageCost]),
    ).to.deep.equal([
      ['g1', 2, { held: false, cover: 90, build: 12_000, total: 12_090 }],
      ['w1', 1, { held: true, cover: 3060, build: 0, total: 3060 }],
    ]);
    const builds = explainPlacement(
      given(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 1000)),
      call(),
    );
    expect(builds.image?.reason).to.equal(
      'g1 builds the image: cost 1,090 (cover 90 + build 1,000); the best holder, w1, costs 3,060 (cover 3,060)',
    );
    const unknown = explainPlacement(
      given(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 0)),
      call(),
    );
    expect(unknown.image?.reason).to.equal(
      'w1 holds the image: cost 3,060 (cover 3,060); a build elsewhere costs more (no holder recorded how long its build took)',
    );
    expect(unknown.workers.find((w) => w.workerId === 'g1')?.imageCost).to.deep.equal({
      held: false,
      cover: 90,
      build: null,
      total: null,
    });
    const nobody = explainPlacement(given(IMAGE_COST_RULES_VERSION, COSTS), call());
    expect(nobody.image?.reason).to.equal(
      'no worker holds the image: it is built on g1, whose cover is lowest: 90',
    );
  });

  it("the explain page prints the image line and each worker's image cost", () => {
    const log = history(...clusterLog(IMAGE_COST_RULES_VERSION, COSTS, built('w1', 12_000)));
    const page = explainPageLines(log, call());
    expect(page).to.include(
      `image ${KEY.slice(0, 16)}: held by w1; w1 holds the image: cost 3,060 (cover 3,060); the best build elsewhere, on g1, costs 12,090 (cover 90 + build 12,000)`,
    );
    expect(
      page.some((line) => line.startsWith('ranking key: the lowest image cost first')),
    ).to.equal(true);
    const rows = page.filter((line) => /^(w|g)1 {2}/.test(line));
    expect(rows.map((line) => /image (.*?) {2}key/.exec(line)?.[1])).to.deep.equal([
      'build: cost 12,090 (cover 90 + build 12,000)',
      'held: cost 3,060 (cover 3,060)',
    ]);
  });

  it('given every worker full and the call queued, when the slots free, then admission gives it to the worker of lowest image cost; under 9 to the ranking’s', () => {
    for (const [version, expected] of [
      [IMAGE_COST_RULES_VERSION, 'g1'],
      [NINE, 'w1'],
    ] as const) {
      const log = history(...clusterLog(version, COSTS));
      const arrive = (requestId: string, imageKey: string | null) => {
        const made = decide('call', log.state(), { call: { ...call(imageKey), requestId } });
        log.add(...made.events);
        return made;
      };
      for (const busy of ['b1', 'b2']) arrive(busy, null);
      expect(arrive('r1', KEY).queued, `rules ${version}`).to.be.a('string');
      for (const busy of ['b1', 'b2']) log.add(finished(busy));
      const admitted = decide('admit', log.state(), {});
      expect(admitted.requestId).to.equal('r1');
      expect(workerOf(admitted.placement as PlacementDecision), `rules ${version}`).to.equal(
        expected,
      );
    }
  });
});
