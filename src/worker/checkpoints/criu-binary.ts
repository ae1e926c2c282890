/**
 * Finding the criu binary (`--criu`, else the prefix deploy/install-criu.sh installs to, else
 * PATH), reading its version, and knowing which versions cannot work on this kernel.
 */
import { execFile } from 'node:child_process';
import { access, constants, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { findOnPath } from '../packages/index.js';

const run = promisify(execFile);

/** Where deploy/install-criu.sh installs criu by default. */
export const INSTALLED_CRIU = '/usr/local/lib/readie/criu/sbin/criu';

/** The oldest CRIU that restores on kernels mapping `[vvar_vclock]` (6.13 on). */
export const MINIMUM_CRIU_VERSION = '4.1';

/** The command that installs a working CRIU, for messages. */
export const INSTALL_CRIU_COMMAND = `sudo ${fileURLToPath(new URL('../../../deploy/install-criu.sh', import.meta.url))}`;

/** A criu binary and how it was found. */
export interface CriuLocation {
  readonly path: string;
  readonly foundBy: '--criu' | 'installed prefix' | 'PATH';
}

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The criu to use: `explicit` (--criu / WORKER_CRIU) if given, else INSTALLED_CRIU if present,
 * else `criu` on `path` (with /usr/sbin and /sbin); or why there is none.
 */
export async function locateCriu(
  explicit: string | null,
  path: string,
): Promise<CriuLocation | { readonly problem: string }> {
  if (explicit !== null) {
    if (await executable(explicit)) return { path: explicit, foundBy: '--criu' };
    return { problem: `--criu ${explicit} is not an executable file` };
  }
  if (await executable(INSTALLED_CRIU))
    return { path: INSTALLED_CRIU, foundBy: 'installed prefix' };
  const onPath = await findOnPath('criu', `${path}:/usr/sbin:/sbin`);
  if (onPath) return { path: onPath, foundBy: 'PATH' };
  return {
    problem: `criu is not installed (looked at ${INSTALLED_CRIU} and on PATH): install it with ${INSTALL_CRIU_COMMAND}`,
  };
}

/** The version `criu --version` reports ("4.2.1"), or null when it reports none. */
export async function criuVersion(criu: string): Promise<string | null> {
  const { stdout } = await run(criu, ['--version'], { timeout: 10_000 });
  return /Version:\s*(\d[\d.]*)/.exec(stdout)?.[1] ?? null;
}

/** Compares dotted numeric versions ("4.1" < "4.1.1" < "4.2"). */
export function compareVersions(a: string, b: string): number {
  const left = a.split('.').map(Number);
  const right = b.split('.').map(Number);
  for (let i = 0; i < Math.max(left.length, right.length); i += 1) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return Math.sign(difference);
  }
  return 0;
}

/** Whether this kernel maps the separate `[vvar_vclock]` area that CRIU before 4.1 cannot restore. */
export async function kernelMapsVvarVclock(): Promise<boolean> {
  const maps = await readFile('/proc/self/maps', 'utf8');
  return maps.includes('[vvar_vclock]');
}

/** Why criu `version` cannot work here, or null when it may. */
export function tooOldReason(criu: string, version: string, vvarVclock: boolean): string | null {
  if (!vvarVclock || compareVersions(version, MINIMUM_CRIU_VERSION) >= 0) return null;
  return (
    `criu ${version} (${criu}) is older than ${MINIMUM_CRIU_VERSION}, which this kernel needs: it maps ` +
    `[vvar_vclock], which criu before ${MINIMUM_CRIU_VERSION} cannot restore (checkpoint-restore/criu#2532); ` +
    `install a working one with ${INSTALL_CRIU_COMMAND}, or pass --criu PATH`
  );
}
