import { expect } from 'chai';
import {
  MAX_PRINTABLE_LENGTH,
  printable,
  printableData,
  printableLines,
} from '../../src/shared/printable.js';
import { HOSTILE, UNPRINTABLE } from '../support/hostile-text.js';

describe('printable: tenant text made safe for a terminal', () => {
  for (const [what, hostile, shown] of HOSTILE) {
    it(`shows ${what} safely`, () => {
      const out = printable(hostile);
      expect(out).to.equal(shown);
      expect(out).to.not.match(UNPRINTABLE);
      expect(printable(out), 'idempotent').to.equal(out);
    });
  }

  it('cuts very long text to its bound and says how much was left out', () => {
    const long = `${'a'.repeat(1_000_000)}\x1b[2J`;
    const out = printable(long);
    expect(out.length).to.be.at.most(MAX_PRINTABLE_LENGTH);
    expect(out).to.match(/^a+\.\.\.\(\d+ more characters\)$/);
    const kept = out.indexOf('.');
    expect(out).to.include(`(${long.length - kept} more characters)`);
    expect(printable(out)).to.equal(out);
    // Escapes count toward the bound; the cut never splits one.
    const escapes = printable('\x1b'.repeat(1000));
    expect(escapes.length).to.be.at.most(MAX_PRINTABLE_LENGTH);
    expect(escapes).to.match(/^(\\x1b)+\.\.\.\(\d+ more characters\)$/);
    // A surrogate pair is never split either.
    expect(printable('😀'.repeat(400))).to.not.match(UNPRINTABLE);
  });

  it('keeps text of exactly the bound whole', () => {
    const exact = 'b'.repeat(MAX_PRINTABLE_LENGTH);
    expect(printable(exact)).to.equal(exact);
  });

  it('escapes every string of plain data, keys of maps included, and keeps other values', () => {
    const data = {
      id: 'a\nb',
      count: 3,
      flag: true,
      none: null,
      list: ['\x1b[31m', 'ok'],
      nested: { deeper: ['\u202e'] },
      map: new Map([['k\r', { v: '\x07' }]]),
      set: new Set(['\x00']),
      bytes: Buffer.from('\x1b'),
    };
    const shown = printableData(data);
    expect(shown).to.deep.equal({
      id: 'a\\nb',
      count: 3,
      flag: true,
      none: null,
      list: ['\\x1b[31m', 'ok'],
      nested: { deeper: ['\\u{202e}'] },
      map: new Map([['k\\r', { v: '\\x07' }]]),
      set: new Set(['\\x00']),
      bytes: data.bytes,
    });
    expect(data.id, 'the original is left alone').to.equal('a\nb');
  });

  it('keeps the line breaks of a multi-line message and escapes the rest', () => {
    expect(printableLines('first \x1b[2J\nsecond\r')).to.equal('first \\x1b[2J\nsecond\\r');
  });
});
