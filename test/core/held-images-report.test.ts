/**
 * Given / when / then tests of a worker's report of every image it holds (ReportHeldImages,
 * docs/images.md): given what the router's log has the worker hold, when the worker (restarted,
 * or registering again after the router lost it) lists its images, then the log gains ImageBuilt
 * for what it did not know and ImageRemoved (absent) for what the worker no longer holds, and
 * placement follows. A report is a worker's word: bounded and checked first.
 */
import { expect } from 'chai';
import { IMAGE_RULES_VERSION, place, type PlacedDecision } from '../../src/core/placement/index.js';
import {
  decideHeldImagesReport,
  heldImagesProblem,
  type HeldImageEntry,
  type HeldImagesReport,
} from '../../src/core/registry/index.js';
import type { NewEvent } from '../../src/events/index.js';
import { imageHolders, imageKeyIndexOf } from '../../src/projections/image-holdings.js';
import {
  MAX_HELD_IMAGE_DECLARATIONS,
  MAX_HELD_IMAGES,
} from '../../src/shared/held-image-bounds.js';
import { demand, history, registered, started } from '../support/events.js';

const IMAGE = 'ab'.repeat(32);
const OTHER_IMAGE = '12'.repeat(32);
const KEY = 'cd'.repeat(32);
const OTHER_KEY = 'ef'.repeat(32);

function entry(fields: Partial<HeldImageEntry> = {}): HeldImageEntry {
  return { tenantId: 'acme', imageId: IMAGE, bytes: 27_000, declarations: [KEY], ...fields };
}

function report(images: HeldImageEntry[], complete = true, workerId = 'w2'): HeldImagesReport {
  return { workerId, images, complete };
}

function built(workerId: string, fields: Partial<HeldImageEntry> = {}): NewEvent {
  const image = entry(fields);
  return {
    type: 'ImageBuilt',
    workerId,
    ...image,
    buildMs: 9_000,
    declarations: [...image.declarations],
  };
}

/** w1 and w2 registered under rules 8 (the ranking alone puts w1 first). */
function cluster(...more: NewEvent[]) {
  return history(started({}, IMAGE_RULES_VERSION), registered('w1'), registered('w2'), ...more);
}

function placedOn(events: NewEvent[], imageKey: string): string {
  const decision = place(cluster(...events).state(), {
    requestId: 'r1',
    sessionId: null,
    tenantId: 'acme',
    demand: demand({}),
    imageKey,
  });
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return (decision as PlacedDecision).workerId;
}

describe("core: a worker's report of every image it holds", () => {
  it('given the router knows none of its images (it lost them), when w2 reports the images it found at its start, then ImageBuilt for each, and calls of that image go to w2 again', () => {
    const given = cluster();
    const found = [entry(), entry({ tenantId: null, imageId: OTHER_IMAGE, declarations: [] })];
    const decision = decideHeldImagesReport(given.state(), report(found));
    expect(decision.cause).to.deep.equal({ kind: 'report', workerId: 'w2' });
    expect(decision.registered).to.equal(true);
    // In the order of tenant and identity (no tenant first): the same report, the same events.
    expect(decision.events).to.deep.equal([
      {
        type: 'ImageBuilt',
        workerId: 'w2',
        tenantId: null,
        imageId: OTHER_IMAGE,
        bytes: 27_000,
        buildMs: 0,
        declarations: null,
      },
      {
        type: 'ImageBuilt',
        workerId: 'w2',
        tenantId: 'acme',
        imageId: IMAGE,
        bytes: 27_000,
        buildMs: 0,
        declarations: [KEY],
      },
    ]);
    expect(placedOn([], KEY)).to.equal('w1');
    expect(placedOn(decision.events as NewEvent[], KEY)).to.equal('w2');
    const after = given.add(...decision.events).state();
    expect(after.imageKeys).to.deep.equal(imageKeyIndexOf(after.images));
  });

  it('given the router holds what w2 reports, when w2 reports it again (a registration with nothing changed), then nothing is recorded', () => {
    const given = cluster(built('w2', { declarations: [OTHER_KEY, KEY] }));
    // Keys in another order, one twice: the same set.
    const same = entry({ declarations: [KEY, OTHER_KEY, KEY] });
    expect(decideHeldImagesReport(given.state(), report([same])).events).to.deep.equal([]);
  });

  it('given w2 held two images, when its report lists one (the other deleted while it was down), then ImageRemoved (absent) for the other, and its calls go where the ranking places them', () => {
    const given = cluster(
      built('w2'),
      built('w2', { imageId: OTHER_IMAGE, declarations: [OTHER_KEY] }),
      built('w1', { imageId: OTHER_IMAGE, declarations: [OTHER_KEY] }),
    );
    const decision = decideHeldImagesReport(given.state(), report([entry()]));
    expect(decision.events).to.deep.equal([
      {
        type: 'ImageRemoved',
        workerId: 'w2',
        tenantId: 'acme',
        imageId: OTHER_IMAGE,
        reason: 'absent',
      },
    ]);
    const after = given.add(...decision.events).state();
    expect(imageHolders(after.imageKeys, OTHER_KEY)).to.deep.equal(['w1']);
    expect(imageHolders(after.imageKeys, KEY)).to.deep.equal(['w2']);
    // Another worker's holdings are its own: w1's copy stays.
    expect(after.images.get('w1')?.size).to.equal(1);
  });

  it('given w2 held an image, when its report is not complete (more than a report carries), then what it leaves out is kept and what it lists is added', () => {
    const given = cluster(built('w2'));
    const partial = report([entry({ imageId: OTHER_IMAGE, declarations: [OTHER_KEY] })], false);
    const decision = decideHeldImagesReport(given.state(), partial);
    expect(decision.events.map((event) => event.type)).to.deep.equal(['ImageBuilt']);
    const after = given.add(...decision.events).state();
    expect(imageHolders(after.imageKeys, KEY)).to.deep.equal(['w2']);
    expect(imageHolders(after.imageKeys, OTHER_KEY)).to.deep.equal(['w2']);
  });

  it("given w2 holds an image with other keys or size, when it reports it, then ImageBuilt replaces the record with the worker's", () => {
    const given = cluster(built('w2', { declarations: [KEY] }));
    const decision = decideHeldImagesReport(
      given.state(),
      report([entry({ bytes: 30_000, declarations: [OTHER_KEY] })]),
    );
    expect(decision.events).to.have.length(1);
    const after = given.add(...decision.events).state();
    expect(imageHolders(after.imageKeys, KEY)).to.deep.equal([]);
    expect(imageHolders(after.imageKeys, OTHER_KEY)).to.deep.equal(['w2']);
    expect([...(after.images.get('w2')?.values() ?? [])].map((image) => image.bytes)).to.deep.equal(
      [30_000],
    );
  });

  it('given a worker the router does not know (or evicted), when it reports its images, then nothing is recorded and it must register', () => {
    const decision = decideHeldImagesReport(cluster().state(), report([entry()], true, 'w9'));
    expect(decision.registered).to.equal(false);
    expect(decision.events).to.deep.equal([]);
  });

  it('given a hostile report, then its problem is named before anything is decided', () => {
    const problem = (images: HeldImageEntry[]) => heldImagesProblem(report(images));
    expect(problem([entry(), entry({ tenantId: null })])).to.equal(null);
    expect(problem(Array.from({ length: MAX_HELD_IMAGES + 1 }, () => entry()))).to.match(
      /at most 4096 images, not 4097/,
    );
    // Control characters could make two tenants' slots alike ("\n" separates them).
    expect(problem([entry({ tenantId: `acme\n${IMAGE}` })])).to.match(
      /images\[0\]\.tenant_id: a tenant ID may not hold control characters/,
    );
    expect(problem([entry({ tenantId: 'x'.repeat(257) })])).to.match(/at most 256 characters/);
    expect(problem([entry({ imageId: IMAGE.toUpperCase() })])).to.match(
      /images\[0\]\.image_id must be 64 lowercase hex digits/,
    );
    expect(problem([entry({ declarations: ['../etc'] })])).to.match(/declarations must be 64/);
    expect(problem([entry({ bytes: -1 })])).to.match(/whole number of bytes/);
    expect(problem([entry({ declarations: Array.from({ length: 257 }, () => KEY) })])).to.match(
      /at most 256 keys/,
    );
    const many = Array.from({ length: MAX_HELD_IMAGE_DECLARATIONS / 256 + 1 }, (_, i) =>
      entry({
        imageId: i.toString(16).padStart(64, '0'),
        declarations: Array.from({ length: 256 }, () => KEY),
      }),
    );
    expect(problem(many)).to.match(/at most 16384 declaration keys in all/);
    expect(problem([entry(), entry({ declarations: [] })])).to.match(
      new RegExp(`lists image ${IMAGE} of one tenant twice`),
    );
  });
});
