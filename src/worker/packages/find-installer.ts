/** Finding the installer: uv on PATH if present, else pip. */
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import type { Installer } from '../core/packages/install-command.js';

/** The first executable called `name` on `path`, or null. */
export async function findOnPath(name: string, path: string): Promise<string | null> {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** The installer to use: `choice` `auto` prefers uv when it is on the sandbox's PATH. */
export async function findInstaller(
  choice: 'auto' | 'pip' | 'uv',
  path: string,
): Promise<Installer> {
  if (choice === 'pip') return { kind: 'pip' };
  const uv = await findOnPath('uv', path);
  if (uv) return { kind: 'uv', uv };
  if (choice === 'uv') throw new Error(`--installer uv: no uv on PATH (${path})`);
  return { kind: 'pip' };
}
