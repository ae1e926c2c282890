/** The readie version, from package.json (recorded in `RouterStarted`). */
import { readFileSync } from 'node:fs';

/** The `version` field of readie's package.json. */
export function packageVersion(): string {
  const url = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}
