/** Plain aligned tables for terminal output (cli-table3 without borders). */
import Table from 'cli-table3';
import { printable } from '../../src/shared/printable.js';

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

/**
 * A table with a header row, columns separated by two spaces, no trailing spaces. Every cell is
 * made printable: a log's values come from tenants and workers.
 */
export function table(
  head: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const rendered = new Table({
    head: [...head],
    chars: BORDERLESS,
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  for (const row of rows) rendered.push(row.map((value) => printable(String(value))));
  return rendered
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n');
}

/** A value for a table cell or a line, printable: `-` for nothing. */
export function cell(value: string | number | null | undefined | readonly string[]): string {
  if (value === null || value === undefined || value === '') return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map(printable).join(', ');
  return printable(String(value));
}
