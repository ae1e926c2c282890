/** The resident budget's eviction order (pure): least recently used among the evictable first. */
import { expect } from 'chai';
import { planLoad, type HeldVersion } from '../../../src/worker/core/residency/eviction-plan.js';

const MiB = 1024 ** 2;
const held = (
  checkpointId: string,
  lastUsed: number,
  fields: Partial<HeldVersion> = {},
): HeldVersion => ({
  checkpointId,
  bytes: 100 * MiB,
  lastUsed,
  protected: false,
  inUse: false,
  loading: false,
  ...fields,
});

describe('worker: the eviction plan of a load', () => {
  it('evicts nothing when the load fits, or without a budget', () => {
    expect(planLoad(300 * MiB, 'new', 100 * MiB, [held('a', 1), held('b', 2)])).to.deep.equal({
      ok: true,
      evict: [],
    });
    expect(planLoad(null, 'new', 10_000 * MiB, [held('a', 1)])).to.deep.equal({
      ok: true,
      evict: [],
    });
  });

  it('evicts the least recently used first, just enough', () => {
    const plan = planLoad(250 * MiB, 'new', 100 * MiB, [
      held('a', 30),
      held('b', 10),
      held('c', 20),
    ]);
    expect(plan).to.deep.equal({ ok: true, evict: ['b', 'c'] });
  });

  it('never evicts a protected, running or loading version, nor one that costs nothing', () => {
    const plan = planLoad(250 * MiB, 'new', 100 * MiB, [
      held('protected', 1, { protected: true }),
      held('running', 2, { inUse: true }),
      held('loading', 3, { loading: true }),
      held('free', 4, { bytes: 0 }),
      held('old', 5),
    ]);
    expect(plan).to.deep.equal({ ok: false, problem: plan.ok ? '' : plan.problem });
    if (!plan.ok) {
      expect(plan.problem).to.match(
        /budget of 250MiB is full: 400MiB is held by versions that cannot be evicted \(protected \(protected\), running \(in use\), loading \(loading\)\)/,
      );
    }
    const room = planLoad(500 * MiB, 'new', 100 * MiB, [
      held('protected', 1, { protected: true }),
      held('running', 2, { inUse: true }),
      held('loading', 3, { loading: true }),
      held('old', 5),
      held('older', 4),
    ]);
    expect(room).to.deep.equal({ ok: true, evict: ['older'] });
  });

  it('refuses a version larger than the whole budget, and ignores the version itself', () => {
    const plan = planLoad(50 * MiB, 'big', 100 * MiB, []);
    expect(plan.ok).to.equal(false);
    expect(plan.ok ? '' : plan.problem).to.match(
      /more than this worker's whole resident budget of 50MiB/,
    );
    expect(
      planLoad(100 * MiB, 'same', 100 * MiB, [held('same', 1, { loading: true })]),
    ).to.deep.equal({ ok: true, evict: [] });
  });
});
