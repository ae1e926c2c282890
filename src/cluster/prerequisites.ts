/**
 * What a local cluster needs from the host, checked up front so that a missing piece is named
 * with the command that installs it instead of failing obscurely later.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { natsServerAvailable } from './nats-cluster.js';

/** One missing prerequisite and how to get it. */
export interface Missing {
  readonly what: string;
  readonly install: string;
}

/** What the host offers the cluster. */
export interface HostCheck {
  readonly missing: readonly Missing[];
  /** Whether the Python can import numpy (then a numpy checkpoint is worth building). */
  readonly numpy: boolean;
}

function canImport(python: string, module: string): boolean {
  return spawnSync(python, ['-c', `import ${module}`], { stdio: 'ignore' }).status === 0;
}

const APT_PACKAGES: Readonly<Record<string, string>> = {
  cloudpickle: 'python3-cloudpickle',
  grpc: 'python3-grpcio',
  'google.protobuf': 'python3-protobuf',
  // Every container loads a seccomp filter built with libseccomp's Python bindings.
  seccomp: 'python3-seccomp',
};

/** The Debian packages of the Python modules a worker's executor and the Python client import. */
export const PYTHON_PACKAGES: readonly string[] = Object.values(APT_PACKAGES);

/** What else the local cluster needs besides Python. */
export interface HostNeeds {
  /** The `nats-server` binary, when the log is on JetStream. */
  readonly natsServer?: string;
}

/**
 * Checks the host for the Python modules the workers' executor (cloudpickle, seccomp) and the
 * Python client need, and for `nats-server` when asked.
 */
export function checkHost(python: string, needs: HostNeeds = {}): HostCheck {
  const missing: Missing[] = [];
  if (needs.natsServer !== undefined && !natsServerAvailable(needs.natsServer)) {
    missing.push({
      what: `nats-server (${needs.natsServer}) for the JetStream log`,
      install: 'apt-get install -y nats-server',
    });
  }
  if (!existsSync(python)) {
    missing.push({ what: `Python at ${python}`, install: 'apt-get install -y python3' });
    return { missing, numpy: false };
  }
  for (const [module, pkg] of Object.entries(APT_PACKAGES)) {
    if (!canImport(python, module))
      missing.push({
        what: `Python module ${module} for ${python}`,
        install: `apt-get install -y ${pkg}`,
      });
  }
  return { missing, numpy: canImport(python, 'numpy') };
}

/** The message that names what is missing and the one command that installs all of it. */
export function describeMissing(missing: readonly Missing[]): string {
  const packages = missing.map((m) => m.install.replace('apt-get install -y ', ''));
  return [
    'readie: this host lacks what the local cluster needs:',
    ...missing.map((m) => `  - ${m.what}`),
    'Install it with:',
    `  apt-get update && apt-get install -y ${packages.join(' ')}`,
  ].join('\n');
}
