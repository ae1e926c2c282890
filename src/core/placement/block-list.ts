/**
 * A list kept sorted in short blocks: an item that moves shifts the items of its block, not every
 * item between its old and new places. A worker's load report moves it to a new place in the
 * ranking each time, about a fifth of the list away on average at 1,000 workers; in one flat
 * array that was some 220 items shifted per report.
 *
 * Items are found by their order (`compare`), which must be total: two items compare 0 only when
 * they are the same item. Walking forward with `at` costs O(1) a step; any other jump walks the
 * blocks from the start (a few dozen at 1,000 items).
 */

/** Items per block: a block splits in two past twice this, and merges into the next below half. */
const BLOCK = 32;

export class BlockList<T> {
  private blocks: T[][] = [];
  private count = 0;
  /** Where the last `at` was: its block, and the index of that block's first item. */
  private cursorBlock = 0;
  private cursorStart = 0;

  constructor(private readonly compare: (a: T, b: T) => number) {}

  /** How many items the list holds. */
  get length(): number {
    return this.count;
  }

  /** The item at `index` (0 to `length - 1`). */
  at(index: number): T {
    const blocks = this.blocks;
    let block = this.cursorBlock;
    let start = this.cursorStart;
    if (index < start || block >= blocks.length) {
      block = 0;
      start = 0;
    }
    let items = blocks[block];
    while (items !== undefined && index >= start + items.length) {
      start += items.length;
      block += 1;
      items = blocks[block];
    }
    if (items === undefined || index < 0) {
      throw new RangeError(`index ${index} is outside a list of ${this.count}`);
    }
    this.cursorBlock = block;
    this.cursorStart = start;
    return items[index - start] as T;
  }

  /** Holds `items` alone, sorted (the array is taken, and sorted in place). */
  reset(items: T[]): void {
    items.sort(this.compare);
    this.blocks = [];
    for (let from = 0; from < items.length; from += BLOCK) {
      this.blocks.push(items.slice(from, from + BLOCK));
    }
    this.count = items.length;
    this.moved();
  }

  /** Adds `item` in its place. */
  insert(item: T): void {
    const blocks = this.blocks;
    if (blocks.length === 0) {
      blocks.push([item]);
    } else {
      // The first block whose last item does not rank before `item`, else the last block.
      const at = Math.min(this.blockOf(item), blocks.length - 1);
      const items = blocks[at] as T[];
      // Shifted by hand: for a block's few items, quicker than splice.
      const index = this.lowerBound(items, item);
      items.push(item);
      for (let i = items.length - 1; i > index; i -= 1) items[i] = items[i - 1] as T;
      items[index] = item;
      if (items.length > 2 * BLOCK) blocks.splice(at + 1, 0, items.splice(BLOCK));
    }
    this.count += 1;
    this.moved();
  }

  /** Removes `item`, which the list must hold. */
  remove(item: T): void {
    const blocks = this.blocks;
    const at = this.blockOf(item);
    const items = blocks[at];
    const index = items === undefined ? -1 : this.lowerBound(items, item);
    if (items === undefined || items[index] !== item) {
      throw new Error('the list does not hold the item to remove');
    }
    for (let i = index; i < items.length - 1; i += 1) items[i] = items[i + 1] as T;
    items.pop();
    const next = blocks[at + 1];
    if (items.length === 0) blocks.splice(at, 1);
    else if (
      next !== undefined &&
      items.length < BLOCK / 2 &&
      items.length + next.length <= 2 * BLOCK
    ) {
      items.push(...next);
      blocks.splice(at + 1, 1);
    }
    this.count -= 1;
    this.moved();
  }

  /** The first block whose last item does not rank before `item` (`blocks.length`: none). */
  private blockOf(item: T): number {
    const blocks = this.blocks;
    let low = 0;
    let high = blocks.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      const items = blocks[middle] as T[];
      if (this.compare(items[items.length - 1] as T, item) < 0) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** The first index in `items` whose item does not rank before `item`. */
  private lowerBound(items: readonly T[], item: T): number {
    let low = 0;
    let high = items.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.compare(items[middle] as T, item) < 0) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** The blocks changed: the cursor starts over. */
  private moved(): void {
    this.cursorBlock = 0;
    this.cursorStart = 0;
  }
}
