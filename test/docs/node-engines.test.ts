/**
 * The Node the README names is the Node every installed package supports: `npm install` on it
 * prints no EBADENGINE warning (npm warns when a package's `engines.node` excludes the running
 * Node), and package.json's `engines` says the same floor as the README.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { ROOT } from '../support/replay.js';

interface LockedPackage {
  readonly version?: string;
  readonly engines?: { readonly node?: string } | readonly string[];
}

function json<T>(file: string): T {
  return JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as T;
}

describe('the Node version readie needs', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const named = /Node\.js (\d+\.\d+(?:\.\d+)?) or newer/.exec(readme)?.[1];

  it("package.json's engines say the README's floor", () => {
    expect(named, 'the README names a Node version').to.be.a('string');
    const manifest = json<{ engines: { node: string } }>('package.json');
    expect(semver.minVersion(manifest.engines.node)?.version).to.equal(
      semver.coerce(named)?.version,
    );
  });

  it('every package the lockfile installs supports that Node and the one running here', () => {
    const floor = semver.coerce(named)!.version;
    const lock = json<{ packages: Record<string, LockedPackage> }>('package-lock.json');
    const refusing: string[] = [];
    for (const [path, locked] of Object.entries(lock.packages)) {
      const range = Array.isArray(locked.engines)
        ? undefined
        : (locked.engines as { node?: string })?.node;
      if (path === '' || range === undefined) continue;
      for (const node of [floor, process.versions.node]) {
        if (!semver.satisfies(node, range))
          refusing.push(`${path}@${locked.version}: node ${range} (not ${node})`);
      }
    }
    expect(refusing).to.deep.equal([]);
  });
});
