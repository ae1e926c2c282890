/** Parsing of the human units used by configuration: durations and byte sizes. */

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};
const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
  tb: 1000 ** 4,
};

/** A value that does not parse as the unit it should have. */
export class UnitParseError extends Error {
  override readonly name = 'UnitParseError';
}

/** The forms a duration takes, for messages that refuse one. */
export const DURATION_FORMS = '500ms, 30s, 10m, 1h, 7d';

/**
 * Parses `500ms`, `30s`, `10m`, `1h`, `7d` (a number and its unit) into milliseconds. A bare number is
 * refused: `--probe-interval 5` would otherwise mean 5 ms to a reader who meant 5 s.
 */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (!match) {
    throw new UnitParseError(`"${text}" is not a duration (use e.g. ${DURATION_FORMS})`);
  }
  const unit = match[2]?.toLowerCase();
  if (unit === undefined) {
    throw new UnitParseError(
      `"${text}" has no unit: write ${match[1]}s or ${match[1]}ms (durations take ${DURATION_FORMS})`,
    );
  }
  return Math.round(Number(match[1]) * (DURATION_UNITS[unit] ?? 1));
}

/** Parses `512MiB`, `1GiB`, `2GB` or a bare number of bytes (documented so) into bytes. */
export function parseSize(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*$/i.exec(text);
  if (!match) {
    throw new UnitParseError(
      `"${text}" is not a size (use e.g. 512MiB, 1GiB or a number of bytes)`,
    );
  }
  const unit = (match[2] ?? '').toLowerCase();
  const bytes = Number(match[1]) * (SIZE_UNITS[unit] ?? 1);
  return Math.round(bytes);
}

/**
 * Parses a number as typed (`3`, `-1.5`, `2e3`): a sign, digits with an optional fraction, an
 * optional exponent. What it means (a weight, a cap) is checked by its owner.
 */
export function parseNumber(text: string): number {
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(text.trim())) {
    throw new UnitParseError(`${JSON.stringify(text)} is not a number`);
  }
  return Number(text);
}

/** Parses a whole number of things (`0`, `8`). */
export function parseCount(text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isInteger(value) || value < 0) {
    throw new UnitParseError(`"${text}" is not a whole number`);
  }
  return value;
}

/** Formats milliseconds the way operators write them (`90s`, `1h`, `7d`, `250ms`). */
export function formatDuration(ms: number): string {
  for (const [unit, factor] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms >= factor && ms % factor === 0) return `${ms / factor}${unit}`;
  }
  return `${ms}ms`;
}

/** A duration in ms as read at a glance: `850ms`, `1.2s`, `3m 5s`; `-` for none. */
export function roughDuration(ms: number | undefined): string {
  if (ms === undefined) return '-';
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes}m ${Math.round((ms % 60_000) / 1000)}s`;
}

/**
 * Formats bytes in the largest binary unit they reach (`1GiB`, `512MiB`, `1000B`), whole when
 * exact and with two decimals otherwise (`100.03GiB`): never a smaller unit because the value is
 * a whole number of it, so two sizes side by side read in the same unit (not
 * `104886392KiB exceeds 10.59GiB`).
 */
export function formatSize(bytes: number): string {
  for (const [unit, factor] of [
    ['TiB', 1024 ** 4],
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= factor) {
      const value = bytes / factor;
      return `${Number.isInteger(value) ? value : value.toFixed(2)}${unit}`;
    }
  }
  return `${bytes}B`;
}
