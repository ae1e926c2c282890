import { expect } from 'chai';
import { budgetOf, usableSlots, workerSlots } from '../../src/core/placement/index.js';
import { demand, GiB, history, placed, registered, requested } from '../support/events.js';

describe("core: a tenant's usable slots", () => {
  it('given an empty worker, then the container limit or the memory headroom binds, whichever comes first', () => {
    const state = history(registered('w1')).state();
    const worker = state.workers.get('w1')!;
    // 8 containers; 16 GiB x 0.9 = 14.4 GiB holds 14 calls of 1 GiB and 3 of 4 GiB.
    expect(workerSlots(worker, budgetOf(demand(), state.config), state.config)).to.equal(8);
    const fourGiB = budgetOf(demand({ memory: 4 * GiB }), state.config);
    expect(workerSlots(worker, fourGiB, state.config)).to.equal(3);
  });

  it('given a call placed and reserved, then it counts against both limits', () => {
    const state = history(
      registered('w1'),
      requested('r1', { demand: demand({ memory: 3 * GiB }) }),
      placed('r1', 'w1', { memory: 3 * GiB }),
    ).state();
    const worker = state.workers.get('w1')!;
    // 14.4 GiB less 3 GiB reserved holds two more calls of 4 GiB; the limit leaves 7 of 1 GiB.
    const fourGiB = budgetOf(demand({ memory: 4 * GiB }), state.config);
    expect(workerSlots(worker, fourGiB, state.config)).to.equal(2);
    expect(workerSlots(worker, budgetOf(demand(), state.config), state.config)).to.equal(7);
  });

  it('given workers that take no calls, then they count no slots, and the count says how many workers have any', () => {
    const state = history(
      registered('w1'),
      registered('w2', { status: 'error', error: 'no python' }),
      registered('w3', { memoryTotal: 2 * GiB }),
    ).state();
    const fourGiB = budgetOf(demand({ memory: 4 * GiB }), state.config);
    expect(usableSlots(state.workers.values(), fourGiB, state.config)).to.deep.equal({
      slots: 3,
      workers: 1,
    });
  });
});
