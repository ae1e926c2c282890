/**
 * Given / when / then tests of placement rules v8's image step (docs/placement.md, "Images"):
 * given workers and the images they reported (`ImageBuilt` with the declaration keys), when a call
 * names an image (`CallRequested.imageKey`), then it goes to the best worker that holds it and
 * passes the filters; without one the ranking chooses as before, and under rules 6 images do not
 * count (so logs recorded before replay as they were).
 */
import { expect } from 'chai';
import {
  explainPlacement,
  IMAGE_RULES_VERSION,
  PlacementCaches,
  place,
  type CallToPlace,
  type PlacedDecision,
  type PlacementDecision,
} from '../../src/core/placement/index.js';
import { decide } from '../../src/core/decisions.js';
import type { NewEvent } from '../../src/events/index.js';
import { applyInPlace, fold } from '../../src/projections/fold.js';
import { stateFromJson, stateToJson } from '../../src/projections/snapshot.js';
import { demand, finished, GiB, history, registered, started } from '../support/events.js';
import { explainPageLines } from '../support/explain-page.js';

const KEY = 'cd'.repeat(32);
const OTHER_KEY = 'ef'.repeat(32);
const IMAGE = 'ab'.repeat(32);

function built(workerId: string, declarations: string[], tenantId = 'acme'): NewEvent {
  return {
    type: 'ImageBuilt',
    workerId,
    tenantId,
    imageId: IMAGE,
    bytes: 27_000,
    buildMs: 12_000,
    declarations,
  };
}

/** w1, w2, w3, all empty (the ranking puts w1 first), w3 holding the image of KEY. */
/** Three workers under `rulesVersion`, w3 holding acme's image of KEY, then `more`. */
function holderLog(rulesVersion: number, ...more: NewEvent[]) {
  return history(
    started({}, rulesVersion),
    registered('w1'),
    registered('w2'),
    registered('w3'),
    built('w3', [KEY]),
    ...more,
  );
}

function given(rulesVersion: number, ...more: NewEvent[]) {
  return holderLog(rulesVersion, ...more).state();
}

function call(imageKey: string | null, memory: number | null = null): CallToPlace {
  return {
    requestId: 'r1',
    sessionId: null,
    tenantId: 'acme',
    demand: demand({ memory }),
    imageKey,
  };
}

function workerOf(decision: PlacementDecision): string {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return (decision as PlacedDecision).workerId;
}

describe("core: placement prefers a worker that holds the call's image (rules v8)", () => {
  it('given w3 holds the image, when a call names it, then it goes to w3 (the ranking alone would pick w1)', () => {
    const state = given(IMAGE_RULES_VERSION);
    expect(workerOf(place(state, call(null)))).to.equal('w1');
    expect(workerOf(place(state, call(KEY)))).to.equal('w3');
    // The router's hot path (the ranked index) decides the same.
    const caches = new PlacementCaches();
    let folded = structuredClone(history().state());
    for (const event of history(
      started({}, IMAGE_RULES_VERSION),
      registered('w1'),
      registered('w2'),
      registered('w3'),
      built('w3', [KEY]),
    ).events) {
      folded = applyInPlace(folded, event, caches);
    }
    expect(workerOf(place(folded, call(KEY), { caches }))).to.equal('w3');
  });

  it("given the image is held, when a call names another declaration (another tenant's key), then the ranking chooses", () => {
    expect(workerOf(place(given(IMAGE_RULES_VERSION), call(OTHER_KEY)))).to.equal('w1');
  });

  it('given two holders, when a call names the image, then the better ranked holder (less loaded) wins', () => {
    const state = given(IMAGE_RULES_VERSION, built('w2', [KEY]), {
      type: 'CallPlaced',
      requestId: 'busy',
      sessionId: null,
      workerId: 'w2',
      containerId: null,
      checkpointId: null,
      packages: [],
      skippedPackages: [],
      memory: 4 * GiB,
      version: null,
      routingRevision: null,
      coldLoad: false,
    });
    expect(workerOf(place(state, call(KEY)))).to.equal('w3');
  });

  it('given the holder does not pass the filters, when a call names the image, then it is built where the ranking places it', () => {
    const state = given(
      IMAGE_RULES_VERSION,
      registered('w3', { memoryTotal: 2 * GiB }),
      built('w3', [KEY]),
    );
    expect(workerOf(place(state, call(KEY, 4 * GiB)))).to.equal('w1');
    const explanation = explainPlacement(state, call(KEY, 4 * GiB));
    expect(explanation.image).to.deep.include({ holders: ['w3'], chosen: null });
    expect(explanation.image?.reason).to.match(/no worker that holds the image passes the filters/);
  });

  it('given the image was removed from its holder, then nothing prefers it', () => {
    const state = given(IMAGE_RULES_VERSION, {
      type: 'ImageRemoved',
      workerId: 'w3',
      tenantId: 'acme',
      imageId: IMAGE,
      reason: 'evicted',
    });
    expect(workerOf(place(state, call(KEY)))).to.equal('w1');
  });

  it("given a snapshot of the holdings, then the restored state prefers the holder, and the holder's removal report, folded after, frees it", () => {
    const removed: NewEvent = {
      type: 'ImageRemoved',
      workerId: 'w3',
      tenantId: 'acme',
      imageId: IMAGE,
      reason: 'evicted',
    };
    const events = holderLog(IMAGE_RULES_VERSION, removed).events;
    const restored = stateFromJson(stateToJson(fold(events.slice(0, -1))));
    expect(workerOf(place(restored, call(KEY)))).to.equal('w3');
    // The restored holdings are keyed as the fold keys them, so the removal finds the image.
    expect(workerOf(place(fold(events.slice(-1), restored), call(KEY)))).to.equal('w1');
  });

  it('given a log recorded under rules 6, when a call names an image, then images do not count', () => {
    const state = given(6);
    expect(workerOf(place(state, call(KEY)))).to.equal('w1');
    expect(explainPlacement(state, call(KEY)).image).to.equal(undefined);
  });

  it('explains the image: who holds it, the column per worker, the holder ranked first', () => {
    const explanation = explainPlacement(given(IMAGE_RULES_VERSION), call(KEY));
    expect(explanation.image).to.deep.equal({
      imageKey: KEY,
      holders: ['w3'],
      chosen: 'w3',
      reason: 'w3 holds the image: restored there, not built',
    });
    expect(
      explanation.workers.map((worker) => [worker.workerId, worker.holdsImage, worker.rank]),
    ).to.deep.equal([
      ['w1', false, 2],
      ['w2', false, 3],
      ['w3', true, 1],
    ]);
  });

  it("the explain page prints the image: its holders and what they decided, and each worker's image column", () => {
    const log = holderLog(IMAGE_RULES_VERSION);
    const page = explainPageLines(log, call(KEY));
    expect(page).to.include(
      "ranking key: a holder of the call's image first, then (flavor-penalty, memory-pressure, cpu-pressure, in-flight, worker ID), lowest wins",
    );
    expect(page).to.include(
      `image ${KEY.slice(0, 16)}: held by w3; w3 holds the image: restored there, not built`,
    );
    const rows = page.filter((line) => /^w\d {2}/.test(line));
    expect(
      rows.map((line) =>
        /^(w\d) .*rank (\d)(?: \(chosen\))? {2}image (held|-) {2}key/.exec(line)?.slice(1),
      ),
    ).to.deep.equal([
      ['w1', '2', '-'],
      ['w2', '3', '-'],
      ['w3', '1', 'held'],
    ]);
  });

  it('given every worker full and a call naming the image queued, when the slots free, then admission gives it to the holder as placement would have', () => {
    for (const [version, expected] of [
      [IMAGE_RULES_VERSION, 'w3'],
      [7, 'w1'],
    ] as const) {
      const log = history(
        started({ QUEUE_TIMEOUT: 600_000 }, version),
        ...['w1', 'w2', 'w3'].map((id) => registered(id, { maxContainers: 1 })),
        built('w3', [KEY]),
      );
      const arrive = (requestId: string, imageKey: string | null) => {
        const made = decide('call', log.state(), { call: { ...call(imageKey), requestId } });
        log.add(...made.events);
        return made;
      };
      for (const busy of ['b1', 'b2', 'b3']) arrive(busy, null);
      expect(arrive('r1', KEY).queued, `rules ${version}`).to.be.a('string');
      for (const busy of ['b1', 'b2', 'b3']) {
        log.add(finished(busy));
      }
      const admitted = decide('admit', log.state(), {});
      expect(admitted.requestId).to.equal('r1');
      expect(workerOf(admitted.placement as PlacementDecision), `rules ${version}`).to.equal(
        expected,
      );
    }
  });
});
