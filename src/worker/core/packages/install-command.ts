/**
 * The commands of a package install, in two halves. The worker fetches wheels on the host side
 * (`pip download`: the network access the install needs, which user code never gets) into a
 * directory the container sees read-only; the container then installs from local directories
 * only (`uv pip install` where uv exists, else `python -m pip install`, both with no index).
 * Pure: the choice of installer is passed in.
 */

/** Where packages come from; with neither set, pip's own configuration on the host decides. */
export interface PackageSource {
  /** A package index URL (PEP 503 simple API), e.g. a production mirror. */
  readonly indexUrl: string | null;
  /** A local directory of wheels; alone, it is the only source (offline installs, no fetch). */
  readonly wheelDir: string | null;
}

/** Which installer runs inside the container. */
export type Installer = { readonly kind: 'uv'; readonly uv: string } | { readonly kind: 'pip' };

/** A command: argv and extra environment. */
export interface InstallCommand {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** Why a requirement string is refused, or null when it is acceptable. */
export function requirementProblem(requirement: string): string | null {
  if (requirement.trim() === '') return 'an empty requirement';
  if (requirement.length > 1000) return `requirement "${requirement.slice(0, 40)}..." is too long`;
  if (requirement.trimStart().startsWith('-')) {
    return `requirement "${requirement}" looks like an installer option`;
  }
  if (/[\0\r\n]/.test(requirement)) return `requirement "${requirement}" contains a line break`;
  return null;
}

/** Whether installs fetch from an index on the host side (everything but a wheel dir alone). */
export function fetches(source: PackageSource): boolean {
  return source.indexUrl !== null || source.wheelDir === null;
}

/** `pip download` into `dest`, wheels only, quietly: the start of every host-side fetch. */
export function pipDownload(python: string, dest: string): string[] {
  return [
    python,
    '-m',
    'pip',
    'download',
    '--dest',
    dest,
    '--only-binary=:all:',
    '--no-input',
    '--disable-pip-version-check',
    '--progress-bar',
    'off',
  ];
}

/**
 * The host-side fetch: `pip download` of `requirements` and their dependencies into `dest`, as
 * wheels only (building an sdist would run a package's code on the host), or null when the wheel
 * directory alone is the source.
 */
export function fetchCommand(
  python: string,
  source: PackageSource,
  dest: string,
  cacheDir: string,
  requirements: readonly string[],
): InstallCommand | null {
  if (!fetches(source)) return null;
  const args = [...pipDownload(python, dest), '--cache-dir', cacheDir];
  if (source.indexUrl) args.push('--index-url', source.indexUrl);
  if (source.wheelDir) args.push('--find-links', source.wheelDir);
  const configured = source.indexUrl !== null || source.wheelDir !== null;
  return {
    argv: [...args, '--', ...requirements],
    // A configured source replaces the host's pip configuration (its index, its find-links).
    env: configured ? { PIP_CONFIG_FILE: '/dev/null' } : {},
  };
}

/**
 * The in-container install of `requirements` into `prefix` for the interpreter `python`, from
 * the local directories `findLinks` only (no index: the container has no way to one).
 * `compileBytecode`: the prefix is imported by many containers later and bound read-only there
 * (an image), so its modules' bytecode is compiled now: an import from a read-only prefix without
 * `.pyc` files compiles every module again in every container. pip compiles by default; uv only
 * when asked.
 */
export function installCommand(
  installer: Installer,
  python: string,
  findLinks: readonly string[],
  prefix: string,
  requirements: readonly string[],
  { compileBytecode = false }: { readonly compileBytecode?: boolean } = {},
): InstallCommand {
  const sources = ['--no-index', ...findLinks.flatMap((dir) => ['--find-links', dir])];
  if (installer.kind === 'uv') {
    return {
      argv: [
        installer.uv,
        'pip',
        'install',
        '--python',
        python,
        '--prefix',
        prefix,
        ...(compileBytecode ? ['--compile-bytecode'] : []),
        ...sources,
        '--',
        ...requirements,
      ],
      env: { UV_CACHE_DIR: '/tmp/.readie/uv-cache', UV_NO_PROGRESS: '1', UV_NO_CONFIG: '1' },
    };
  }
  return {
    argv: [
      python,
      '-m',
      'pip',
      'install',
      '--prefix',
      prefix,
      '--no-input',
      '--disable-pip-version-check',
      '--no-warn-script-location',
      '--progress-bar',
      'off',
      ...sources,
      '--',
      ...requirements,
    ],
    env: { PIP_CONFIG_FILE: '/dev/null' },
  };
}
