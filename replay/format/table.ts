/** Plain aligned tables for terminal output (cli-table3 without borders). */
import Table from 'cli-table3';

const BORDERLESS = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
};

/** A table with a header row, columns separated by two spaces, no trailing spaces. */
export function table(
  head: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const rendered = new Table({
    head: [...head],
    chars: BORDERLESS,
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  for (const row of rows) rendered.push(row.map(String));
  return rendered
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n');
}

/** A value for a table cell: `-` for nothing. */
export function cell(value: string | number | null | undefined | readonly string[]): string {
  if (value === null || value === undefined || value === '') return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.join(', ');
  return String(value);
}
