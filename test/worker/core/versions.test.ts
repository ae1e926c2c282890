/**
 * The worker's versions as a value (pure): given changes folded at given times, when a load or a
 * change of the backend comes, then what it evicts or reports.
 */
import { expect } from 'chai';
import {
  backendChanges,
  evolveVersions,
  isResidentNow,
  planVersionLoad,
  reportedVersions,
  startingVersions,
  type VersionChange,
  type Versions,
} from '../../../src/worker/core/residency/index.js';

const MiB = 1024 ** 2;
const T0 = 1_700_000_000_000;
const bytes = (): number => 100 * MiB;

/** The versions after `changes`, each folded at its own time. */
function given(
  held: readonly string[],
  ...changes: (readonly [at: number, change: VersionChange])[]
): Versions {
  let versions = startingVersions(held, new Set(held), T0);
  for (const [at, change] of changes) versions = evolveVersions(versions, change, at);
  return versions;
}

const loaded = (checkpointId: string): VersionChange => ({
  type: 'state',
  checkpointId,
  state: 'resident',
  error: null,
});

describe('worker core: the versions a worker holds', () => {
  it('given checkpoints held at start, then those the catalogue lists are resident, reported by ID', () => {
    const versions = startingVersions(['v2', 'v1', 'base'], new Set(['v1', 'v2']), T0);
    expect(reportedVersions(versions)).to.deep.equal([
      { checkpointId: 'v1', state: 'resident', error: null },
      { checkpointId: 'v2', state: 'resident', error: null },
    ]);
    expect(isResidentNow(versions, 'v1', ['v1', 'v2'])).to.equal(true);
    expect(isResidentNow(versions, 'v1', ['v2'])).to.equal(false);
    expect(isResidentNow(versions, 'base', ['base'])).to.equal(false);
  });

  it('given a budget of two, when a third loads, then the least recently used goes', () => {
    const versions = given(
      ['a', 'b'],
      [T0 + 10, { type: 'used', checkpointId: 'a' }],
      [T0 + 20, { type: 'used', checkpointId: 'b' }],
      [T0 + 30, { type: 'used', checkpointId: 'a' }],
    );
    expect(planVersionLoad(versions, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['b'],
    });
  });

  it('given a running call of a version, then it is never evicted, and its end counts as its last use', () => {
    const running = given(
      ['a', 'b'],
      [T0 + 10, { type: 'call-started', checkpointId: 'a' }],
      [T0 + 20, { type: 'used', checkpointId: 'b' }],
    );
    expect(planVersionLoad(running, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['b'],
    });
    const ended = evolveVersions(running, { type: 'call-ended', checkpointId: 'a' }, T0 + 30);
    expect(planVersionLoad(ended, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['b'],
    });
    const bothEnded = evolveVersions(ended, { type: 'used', checkpointId: 'b' }, T0 + 40);
    expect(planVersionLoad(bothEnded, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['a'],
    });
  });

  it('counts each running call: a version stays in use until its last call ends', () => {
    const two = given(
      ['a', 'b'],
      [T0 + 10, { type: 'call-started', checkpointId: 'a' }],
      [T0 + 11, { type: 'call-started', checkpointId: 'a' }],
      [T0 + 12, { type: 'call-ended', checkpointId: 'a' }],
      [T0 + 50, { type: 'used', checkpointId: 'b' }],
    );
    expect(planVersionLoad(two, 'c', 200 * MiB, bytes)).to.deep.equal({ ok: true, evict: ['b'] });
    const none = evolveVersions(two, { type: 'call-ended', checkpointId: 'a' }, T0 + 13);
    expect(planVersionLoad(none, 'c', 200 * MiB, bytes)).to.deep.equal({ ok: true, evict: ['a'] });
  });

  it('given the router protects a version, then it is never evicted; an older set never replaces a newer one', () => {
    const protectedA = given(
      ['a', 'b'],
      [T0 + 10, { type: 'protected', checkpointIds: ['a'], seq: 7 }],
      [T0 + 20, { type: 'used', checkpointId: 'b' }],
    );
    expect([...protectedA.protectedIds]).to.deep.equal(['a']);
    expect(planVersionLoad(protectedA, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['b'],
    });
    const stale = evolveVersions(
      protectedA,
      { type: 'protected', checkpointIds: ['b'], seq: 6 },
      T0 + 30,
    );
    expect([...stale.protectedIds]).to.deep.equal(['a']);
    const both = evolveVersions(
      protectedA,
      { type: 'protected', checkpointIds: ['a', 'b'], seq: 8 },
      T0 + 30,
    );
    const plan = planVersionLoad(both, 'c', 200 * MiB, bytes);
    expect(plan.ok).to.equal(false);
    expect(plan.ok ? '' : plan.problem).to.include('a (protected), b (protected)');
  });

  it('given a version loading, then it is not evicted for another load, and a new version is recorded when first reported', () => {
    const versions = given(
      ['a'],
      [T0 + 5, { type: 'state', checkpointId: 'b', state: 'loading', error: null }],
    );
    expect(versions.entries.get('b')).to.deep.equal({
      state: 'loading',
      error: null,
      lastUsed: T0 + 5,
    });
    expect(planVersionLoad(versions, 'c', 200 * MiB, bytes)).to.deep.equal({
      ok: true,
      evict: ['a'],
    });
    const done = evolveVersions(versions, loaded('b'), T0 + 9);
    expect(done.entries.get('b')?.lastUsed).to.equal(T0 + 5);
  });

  it("given the backend's held set changed, then a resident version it lost is cached or evicted, and one back is resident", () => {
    const versions = given(
      ['a', 'b', 'c'],
      [T0, { type: 'state', checkpointId: 'c', state: 'cached', error: null }],
    );
    const changes = backendChanges(versions, {
      held: new Set(['c']),
      hasImage: (checkpointId) => checkpointId === 'a',
      isResident: (checkpointId) => checkpointId === 'c',
    });
    expect(changes).to.deep.equal([
      { checkpointId: 'a', state: 'cached' },
      { checkpointId: 'b', state: 'evicted' },
      { checkpointId: 'c', state: 'resident' },
    ]);
  });
});
