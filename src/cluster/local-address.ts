/**
 * Where a local cluster's routers listen, written under its state directory by `readie up` so the
 * operator commands (`readie status`, `readie calls`, `readie quota` ...) given the same
 * `--state-dir` reach that cluster on whatever `--port` it took, without READIE_ADDRESS.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** The file naming a local cluster's routers (comma-separated, the leading one first). */
export function localAddressPath(stateDir: string): string {
  return resolve(stateDir, 'router.address');
}

/** Records the routers' addresses of the cluster started under `stateDir`. */
export function writeLocalAddress(stateDir: string, addresses: readonly string[]): void {
  const path = localAddressPath(stateDir);
  rmSync(path, { force: true });
  writeFileSync(path, `${addresses.join(',')}\n`, { mode: 0o600, flag: 'wx' });
}

/** The routers' addresses a local cluster under `stateDir` recorded, or null when there is none. */
export function readLocalAddress(stateDir: string): string | null {
  const path = localAddressPath(stateDir);
  if (!existsSync(path)) return null;
  const text = readFileSync(path, 'utf8').split(/\r?\n/)[0]?.trim() ?? '';
  return text === '' ? null : text;
}
