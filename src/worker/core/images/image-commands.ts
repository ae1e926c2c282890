/**
 * The host-side resolution of an image's requirements: `pip download` of wheels only (never an
 * sdist: building one would run a package's code on the host) into the build's wheel directory.
 * Unlike a per-call install, an image resolves even when the wheel directory is the only source
 * (from it alone, `--no-index`), since its identity is the hash of the wheels it resolved to.
 * Pure.
 */
import {
  fetchCommand,
  pipDownload,
  type InstallCommand,
  type PackageSource,
} from '../packages/install-command.js';

/** The command that resolves `requirements` to wheels in `dest`. */
export function imageFetchCommand(
  python: string,
  source: PackageSource,
  dest: string,
  cacheDir: string,
  requirements: readonly string[],
): InstallCommand {
  const fetch = fetchCommand(python, source, dest, cacheDir, requirements);
  if (fetch) return fetch;
  const wheelDir = source.wheelDir ?? '';
  return {
    argv: [
      ...pipDownload(python, dest),
      '--no-index',
      '--find-links',
      wheelDir,
      '--',
      ...requirements,
    ],
    env: { PIP_CONFIG_FILE: '/dev/null' },
  };
}
