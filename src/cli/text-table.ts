/**
 * The one way the CLI draws a table (cli-table3, no colours): `readie status`, `readie calls`,
 * `readie images`. Cells must be printable already (`src/shared/printable.ts`). Pure.
 */
import Table from 'cli-table3';

/** `rows` under `head`, boxed, without a trailing newline. */
export function table(head: string[], rows: string[][]): string {
  const out = new Table({ head, style: { head: [], border: [] } });
  out.push(...rows);
  return out.toString();
}
