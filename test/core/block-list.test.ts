import { expect } from 'chai';
import fc from 'fast-check';
import { BlockList } from '../../src/core/placement/block-list.js';

/** Items with a key and an ID, ordered by key then ID (a total order, as the candidates'). */
interface Item {
  readonly key: number;
  readonly id: number;
}

const compare = (a: Item, b: Item): number => a.key - b.key || a.id - b.id;

/** Every item of `list` through `at`, walking forward. */
function walked(list: BlockList<Item>): Item[] {
  return Array.from({ length: list.length }, (_, i) => list.at(i));
}

describe('BlockList', () => {
  it('keeps the order a sorted array keeps, through moves, splits and merges', () => {
    // An operation: move item `id` (of 400) to `key`, or take it out (`key` null).
    const operation = fc.record({
      id: fc.integer({ min: 0, max: 399 }),
      key: fc.option(fc.integer({ min: 0, max: 50 }), { nil: null }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 400 }),
        fc.array(operation, { maxLength: 600 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (start, operations, probes) => {
          const list = new BlockList(compare);
          const held = new Map<number, Item>();
          for (let id = 0; id < start; id += 1) held.set(id, { key: id % 7, id });
          list.reset([...held.values()]);
          for (const { id, key } of operations) {
            const before = held.get(id);
            if (before !== undefined) {
              list.remove(before);
              held.delete(id);
            }
            if (key === null) continue;
            const after = { key, id };
            list.insert(after);
            held.set(id, after);
          }
          const expected = [...held.values()].sort(compare);
          expect(list.length).to.equal(expected.length);
          expect(walked(list)).to.deep.equal(expected);
          // Jumps back and forth read the same items as the walk.
          for (const probe of probes) {
            if (expected.length === 0) break;
            const index = probe % expected.length;
            expect(list.at(index)).to.equal(expected[index]);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses to remove an item it does not hold, and an index outside it', () => {
    const list = new BlockList(compare);
    list.reset([
      { key: 1, id: 1 },
      { key: 2, id: 2 },
    ]);
    // Equal by order, but another object: not the item the list holds.
    expect(() => list.remove({ key: 1, id: 1 })).to.throw('does not hold');
    expect(() => list.remove({ key: 3, id: 3 })).to.throw('does not hold');
    expect(() => list.at(2)).to.throw(RangeError, 'index 2 is outside a list of 2');
    expect(() => list.at(-1)).to.throw(RangeError);
    expect(list.length).to.equal(2);
  });
});
