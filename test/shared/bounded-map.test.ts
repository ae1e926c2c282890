import { expect } from 'chai';
import { BoundedMap } from '../../src/shared/bounded-map.js';

describe('BoundedMap', () => {
  it('keeps at most its limit, forgetting the oldest set; setting a key again makes it newest', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1);
    map.set('b', 2);
    map.set('a', 3);
    map.set('c', 4);
    expect(map.size).to.equal(2);
    expect(map.get('b')).to.equal(undefined);
    expect(map.get('a')).to.equal(3);
    expect(map.get('c')).to.equal(4);
  });
});
