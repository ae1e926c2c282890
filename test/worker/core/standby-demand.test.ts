/** Standbys sized to demand (pure): given the new containers started, when asked, then the target. */
import { expect } from 'chai';
import {
  demandAfterStart,
  demandAt,
  NO_DEMAND,
  standbyMemoryRoom,
  standbysAboveTarget,
  standbysToRestore,
  standbyTarget,
  type StandbyDemand,
  type StandbyDemandPolicy,
} from '../../../src/worker/core/containers/index.js';

const policy: StandbyDemandPolicy = { floor: 1, cap: 8, burstMs: 1_000, windowMs: 60_000 };

/** The demand after starts of `checkpointId` at each of `times`. */
function started(times: readonly number[], checkpointId = 'ckpt-a', from = NO_DEMAND) {
  return times.reduce<StandbyDemand>(
    (demand, at) => demandAfterStart(demand, checkpointId, at, policy),
    from,
  );
}

describe('worker core: standbys sized to demand', () => {
  it('given no demand, then the floor (--standby) is kept, and none with standbys off', () => {
    expect(standbyTarget(NO_DEMAND, 'ckpt-a', 0, policy)).to.equal(1);
    expect(standbyTarget(NO_DEMAND, 'ckpt-a', 0, { ...policy, floor: 3 })).to.equal(3);
    const burst = started([0, 1, 2, 3, 4]);
    expect(standbyTarget(burst, 'ckpt-a', 10, { ...policy, floor: 0 })).to.equal(0);
  });

  it('given a map that opened five sessions at once, then five standbys are kept for it', () => {
    const burst = started([1_000, 1_005, 1_010, 1_020, 1_030]);
    expect(standbyTarget(burst, 'ckpt-a', 2_000, policy)).to.equal(5);
    // Only that checkpoint's: another keeps its floor.
    expect(standbyTarget(burst, 'ckpt-b', 2_000, policy)).to.equal(1);
  });

  it('given plain calls at 30 a second, then a second of them is asked for, up to the cap', () => {
    const steady = started(Array.from({ length: 90 }, (_, i) => i * 33));
    expect(standbyTarget(steady, 'ckpt-a', 3_000, policy)).to.equal(8);
    expect(standbyTarget(steady, 'ckpt-a', 3_000, { ...policy, cap: 40 })).to.equal(31);
  });

  it('given starts spread wider than a second, then demand is the most within any second', () => {
    const spread = started([0, 400, 900, 1_500, 5_000]);
    expect(standbyTarget(spread, 'ckpt-a', 6_000, policy)).to.equal(3);
  });

  it('given demand older than the window, then it is forgotten: the target falls to the floor', () => {
    const burst = started([0, 1, 2, 3]);
    expect(standbyTarget(burst, 'ckpt-a', 59_999, policy)).to.equal(4);
    // A start counts for the window after it: at 60.001 s the first has gone, at 60.003 s all.
    expect(standbyTarget(burst, 'ckpt-a', 60_001, policy)).to.equal(2);
    expect(standbyTarget(burst, 'ckpt-a', 60_003, policy)).to.equal(1);
    expect(demandAt(burst, 60_003, policy).size).to.equal(0);
    expect(demandAt(burst, 59_999, policy).get('ckpt-a')).to.have.length(4);
  });

  it('remembers a bounded number of starts per checkpoint', () => {
    const many = started(Array.from({ length: 5_000 }, (_, i) => i));
    expect(many.get('ckpt-a')).to.have.length(1_024);
  });

  it('given a target, then restores fill up to it within the room, and what is above it goes', () => {
    const shelf = { perCheckpoint: 1, held: ['ckpt-a'], dropped: new Set<string>(), closed: false };
    expect(standbysToRestore(shelf, 'ckpt-a', 1, Infinity, 5)).to.equal(4);
    expect(standbysToRestore(shelf, 'ckpt-a', 1, 2, 5)).to.equal(2);
    expect(standbysAboveTarget(5, 1)).to.equal(4);
    expect(standbysAboveTarget(1, 5)).to.equal(0);
  });

  it('given the free memory, then as many standbys fit as it holds of their measured size', () => {
    const MiB = 1024 * 1024;
    expect(standbyMemoryRoom(100 * MiB, 20 * MiB)).to.equal(5);
    expect(standbyMemoryRoom(-5 * MiB, 20 * MiB)).to.equal(0);
    expect(standbyMemoryRoom(5 * MiB, 0)).to.equal(Infinity);
  });
});
