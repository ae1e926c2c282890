import { expect } from 'chai';
import { decideImageReport } from '../../src/core/registry/index.js';
import { validateEvent } from '../../src/events/decode.js';
import { imageHolders, imageKeyIndexOf } from '../../src/projections/image-holdings.js';
import { history, registered } from '../support/events.js';

const ID = 'ab'.repeat(32);
const KEY = 'cd'.repeat(32);
const OTHER_KEY = 'ef'.repeat(32);

describe("core: a worker's report of a tenant's image", () => {
  it('given a registered worker, when it reports a build, then ImageBuilt names worker, tenant, image, size, time and declarations, and the state holds it there', () => {
    const given = history(registered('w1'));
    const decision = decideImageReport(given.state(), {
      workerId: 'w1',
      tenantId: 'acme',
      outcome: 'built',
      imageId: ID,
      bytes: 27_132,
      buildMs: 12_054,
      declarations: [KEY],
    });
    expect(decision.cause).to.deep.equal({ kind: 'report', workerId: 'w1' });
    expect(decision.registered).to.equal(true);
    expect(decision.events).to.deep.equal([
      {
        type: 'ImageBuilt',
        workerId: 'w1',
        tenantId: 'acme',
        imageId: ID,
        bytes: 27_132,
        buildMs: 12_054,
        declarations: [KEY],
      },
    ]);
    const before = given.state();
    const after = given.add(...decision.events).state();
    expect(after.workers.get('w1')).to.deep.equal(before.workers.get('w1'));
    expect(imageHolders(after.imageKeys, KEY)).to.deep.equal(['w1']);
    // Another tenant's declaration key is another key: it is not held.
    expect(imageHolders(after.imageKeys, OTHER_KEY)).to.deep.equal([]);
    const removed = given
      .add(...decision.events, {
        type: 'ImageRemoved',
        workerId: 'w1',
        tenantId: 'acme',
        imageId: ID,
        reason: 'removed',
      })
      .state();
    expect(imageHolders(removed.imageKeys, KEY)).to.deep.equal([]);
    expect(removed.images.size).to.equal(0);
    expect(removed.imageKeys.size).to.equal(0);
    // The same image reported again with another declaration's key: the index follows the record.
    const again = given
      .add(...decision.events, {
        type: 'ImageBuilt',
        workerId: 'w1',
        tenantId: 'acme',
        imageId: ID,
        bytes: 27_132,
        buildMs: 0,
        declarations: [OTHER_KEY],
      })
      .state();
    expect(imageHolders(again.imageKeys, KEY)).to.deep.equal([]);
    expect(imageHolders(again.imageKeys, OTHER_KEY)).to.deep.equal(['w1']);
    expect(again.imageKeys).to.deep.equal(imageKeyIndexOf(again.images));
  });

  it('given a registered worker, when a build fails or an image goes, then ImageBuildFailed (error bounded) or ImageRemoved', () => {
    const state = history(registered('w1')).state();
    const failed = decideImageReport(state, {
      workerId: 'w1',
      tenantId: null,
      outcome: 'build-failed',
      error: 'x'.repeat(20_000),
    });
    expect(failed.events[0]).to.include({
      type: 'ImageBuildFailed',
      workerId: 'w1',
      tenantId: null,
    });
    const [failure] = failed.events;
    expect(failure?.type === 'ImageBuildFailed' && failure.error.length).to.equal(8192);
    const evicted = decideImageReport(state, {
      workerId: 'w1',
      tenantId: 'acme',
      outcome: 'evicted',
      imageId: ID,
    });
    expect(evicted.events).to.deep.equal([
      { type: 'ImageRemoved', workerId: 'w1', tenantId: 'acme', imageId: ID, reason: 'evicted' },
    ]);
  });

  it('given a worker the router does not know, then nothing is recorded and it must register again', () => {
    const decision = decideImageReport(history().state(), {
      workerId: 'w9',
      tenantId: 'acme',
      outcome: 'built',
      imageId: ID,
      bytes: 1,
      buildMs: 1,
      declarations: [],
    });
    expect(decision).to.include({ registered: false });
    expect(decision.events).to.deep.equal([]);
  });

  it('an image event whose identity is not 64 hex digits does not fit the schema', () => {
    const event = {
      seq: 1,
      at: '2026-12-05T00:00:00.000Z',
      cause: 'report:w1',
      type: 'ImageBuilt',
      workerId: 'w1',
      tenantId: 'acme',
      imageId: 'not-an-id',
      bytes: 1,
      buildMs: 1,
    };
    expect(() => validateEvent(event)).to.throw();
    expect(() => validateEvent({ ...event, imageId: ID })).to.not.throw();
  });
});
