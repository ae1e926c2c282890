/**
 * The command that installs a call's packages into its container's prefix: `uv pip install`
 * where uv exists, else `python -m pip install`. Pure: the choice of installer is passed in.
 */

/** Where packages come from; with neither set, the installer's own configuration decides. */
export interface PackageSource {
  /** A package index URL (PEP 503 simple API), e.g. a production mirror. */
  readonly indexUrl: string | null;
  /** A local directory of wheels; alone, it is the only source (offline installs). */
  readonly wheelDir: string | null;
}

/** Which installer runs. */
export type Installer = { readonly kind: 'uv'; readonly uv: string } | { readonly kind: 'pip' };

/** An install command: argv and extra environment. */
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

function sourceArgs(source: PackageSource): string[] {
  const args: string[] = [];
  if (source.indexUrl) args.push('--index-url', source.indexUrl);
  if (source.wheelDir) {
    args.push('--find-links', source.wheelDir);
    if (!source.indexUrl) args.push('--no-index');
  }
  return args;
}

/** The command installing `requirements` into `prefix` for the interpreter `python`. */
export function installCommand(
  installer: Installer,
  python: string,
  source: PackageSource,
  prefix: string,
  requirements: readonly string[],
): InstallCommand {
  const configured = source.indexUrl !== null || source.wheelDir !== null;
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
        ...sourceArgs(source),
        '--',
        ...requirements,
      ],
      env: {
        UV_CACHE_DIR: '/tmp/.readie/uv-cache',
        UV_NO_PROGRESS: '1',
        ...(configured ? { UV_NO_CONFIG: '1' } : {}),
      },
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
      ...sourceArgs(source),
      '--',
      ...requirements,
    ],
    // A configured source replaces the host's pip configuration (its index, its find-links).
    env: configured ? { PIP_CONFIG_FILE: '/dev/null' } : {},
  };
}
