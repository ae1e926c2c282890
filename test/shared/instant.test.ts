import { expect } from 'chai';
import fc from 'fast-check';
import { instantMs } from '../../src/shared/instant.js';

describe('instantMs: an event instant read as Date.parse reads it', () => {
  it('equals Date.parse for every instant toISOString writes, 1000 to 9999', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1000, 0, 1), max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) }),
        (ms) => {
          const text = new Date(ms).toISOString();
          expect(instantMs(text)).to.equal(Date.parse(text));
          expect(instantMs(text)).to.equal(ms);
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('equals Date.parse for the days that end a month, leap days and year ends', () => {
    for (const text of [
      '2024-02-29T12:00:00.000Z',
      '2100-02-28T23:59:59.999Z',
      '2000-03-01T00:00:00.000Z',
      '1999-12-31T23:59:59.999Z',
      '1970-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
    ]) {
      expect(instantMs(text), text).to.equal(Date.parse(text));
    }
  });

  it('leaves any other text, or a field out of range, to Date.parse (NaN where it says NaN)', () => {
    for (const text of [
      '2026-02-30T00:00:00.000Z',
      '2026-02-31T00:00:00.000Z',
      '2026-13-01T00:00:00.000Z',
      '2026-00-01T00:00:00.000Z',
      '2026-01-01T24:00:00.000Z',
      '2026-01-01T00:60:00.000Z',
      '2026-01-01T00:00:60.000Z',
      '0099-01-01T00:00:00.000Z',
      '2026-01-01T00:00:00.000+01:00',
      '+002026-01-01T00:00:00.000Z',
      '2026-01-01',
      '2026-1x-01T00:00:00.000Z',
      '2026-01-01T00:00:00.00xZ',
      '',
      'not a time',
    ]) {
      expect(Object.is(instantMs(text), Date.parse(text)), text).to.equal(true);
    }
  });
});
