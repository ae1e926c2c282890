/** CRIU in tests: the real probe, run once per test run, and a stand-in for an old criu. */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { probeCriu, type CriuProbe } from '../../src/worker/backend-selection.js';
import { ContainerCgroups } from '../../src/worker/sandbox/index.js';
import { PYTHON } from './python.js';
import { tempDir } from './temp.js';
import { testLogger, testSandbox, testWorkerId } from './worker-harness.js';

let probed: Promise<CriuProbe> | null = null;

/** The worker's CRIU probe on this machine (a real dump and restore), run once. */
export function criuProbe(): Promise<CriuProbe> {
  probed ??= (async () => {
    const workerId = testWorkerId();
    const cgroups = await ContainerCgroups.open(`readie/${workerId}`);
    try {
      return await probeCriu({
        python: PYTHON,
        log: testLogger(),
        cgroups,
        stateDir: tempDir('rw-criu-'),
        sandbox: await testSandbox(),
        workerId,
        criu: null,
        buildTimeoutMs: 60_000,
        rebuildDelayMs: 60_000,
        probeTimeoutMs: 20_000,
      });
    } finally {
      await cgroups.close();
    }
  })();
  return probed;
}

/**
 * Skips the calling suite, saying why, where the probe fails; in CI (CI set) that is a failure
 * instead, since CI installs a working CRIU (deploy/install-criu.sh) and must test it.
 */
export async function requireCriu(context: Mocha.Context): Promise<void> {
  const probe = await criuProbe();
  if (probe.ok) return;
  if (process.env['CI']) throw new Error(`CI must run the CRIU tests, but: ${probe.reason}`);
  console.log(`      skipped: the CRIU probe fails on this machine: ${probe.reason}`);
  context.skip();
}

/**
 * A stand-in criu that reports `version` and fails everything else: the far side of the
 * boundary for the version checks, not a second install.
 */
export function fakeCriu(version: string): string {
  const path = join(tempDir('rw-fake-criu-'), 'criu');
  writeFileSync(
    path,
    [
      '#!/bin/sh',
      `if [ "$1" = --version ]; then echo "Version: ${version}"; exit 0; fi`,
      'echo "this stand-in criu does nothing but report its version" >&2',
      'exit 1',
      '',
    ].join('\n'),
  );
  chmodSync(path, 0o755);
  return path;
}
