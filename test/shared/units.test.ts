import { expect } from 'chai';
import { ConfigError, parseSetting } from '../../src/shared/config.js';
import { formatSize, parseDuration, parseSize, UnitParseError } from '../../src/shared/units.js';

describe('units', () => {
  it('reads durations with their unit', () => {
    expect(parseDuration('500ms')).to.equal(500);
    expect(parseDuration('5s')).to.equal(5_000);
    expect(parseDuration('1.5m')).to.equal(90_000);
    expect(parseDuration('1h')).to.equal(3_600_000);
    expect(parseDuration('7d')).to.equal(7 * 86_400_000);
  });

  it('refuses a duration without a unit, naming the forms it takes', () => {
    expect(() => parseDuration('5')).to.throw(
      UnitParseError,
      /"5" has no unit: write 5s or 5ms .*500ms, 30s, 10m, 1h/,
    );
    expect(() => parseSetting('PROBE_INTERVAL', '5')).to.throw(
      ConfigError,
      /^PROBE_INTERVAL: "5" has no unit/,
    );
    expect(() => parseDuration('5 parsecs')).to.throw(UnitParseError, /500ms, 30s, 10m, 1h, 7d/);
  });

  it('reads sizes with a unit, and a bare number as bytes (documented so)', () => {
    expect(parseSize('512MiB')).to.equal(512 * 1024 ** 2);
    expect(parseSize('1GiB')).to.equal(1024 ** 3);
    expect(parseSize('4096')).to.equal(4096);
    expect(() => parseSize('lots')).to.throw(UnitParseError, /512MiB, 1GiB or a number of bytes/);
  });
});

describe('formatSize: one unit for sizes side by side', () => {
  it('writes a size in the largest unit it reaches, whole when exact, never a smaller unit for being whole in it', () => {
    expect(formatSize(1024 ** 3)).to.equal('1GiB');
    expect(formatSize(512 * 1024 ** 2)).to.equal('512MiB');
    expect(formatSize(1000)).to.equal('1000B');
    // 104886392 KiB is a whole number of KiB: it used to print so beside a limit in GiB.
    expect(formatSize(104_886_392 * 1024)).to.equal('100.03GiB');
    expect(formatSize(Math.round(10.59 * 1024 ** 3))).to.equal('10.59GiB');
    expect(formatSize(1536)).to.equal('1.50KiB');
  });
});
