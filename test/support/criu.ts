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

/**
 * The real criu (`real`), except that while the file `arm` exists, a lazy restore kills its page
 * server the moment the restore is done: the restored process has just been resumed, and the
 * server is still copying its memory in (80 MB take it tens of milliseconds; this takes one
 * signal). It appends to `arm`.killed `killed PID` if the server was still running when it was
 * stopped for the kill, `finished PID` if it had already exited.
 */
export function stallingPageServerCriu(real: string, arm: string): string {
  const path = join(tempDir('rw-stall-criu-'), 'criu');
  writeFileSync(
    path,
    [
      '#!/bin/sh',
      `if [ "$1" = restore ] && [ -e '${arm}' ]; then`,
      '  case " $* " in *" --lazy-pages "*)',
      // The page server and this restore are both children of the same restorer process.
      '    server=""',
      '    for child in $(cat /proc/$PPID/task/*/children); do',
      `      if tr '\\0' ' ' < /proc/$child/cmdline | grep -q ' lazy-pages '; then server=$child; fi`,
      '    done',
      '    if [ -n "$server" ]; then',
      // A killer outside criu's process tree (criu must have no child of its own) that waits
      // for criu to be done (gone, or a zombie until the restorer reaps it).
      '      criu=$$',
      '      ( ( exec 3>&- 4>&-',
      '        while read -r stat < /proc/$criu/stat 2>/dev/null; do',
      '          case "${stat##*) }" in Z*) break ;; esac',
      '        done',
      '        kill -STOP "$server"',
      // A server that had finished is a zombie (Z) until the restorer reaps it; a running one
      // is stopped (T) as soon as the signal is delivered.
      '        while read -r stat < /proc/$server/stat; do',
      '          case "${stat##*) }" in T* | Z*) break ;; esac',
      '        done',
      '        kill -KILL "$server"',
      `        case "\${stat##*) }" in T*) echo "killed $server" ;; *) echo "finished $server" ;; esac >> '${arm}.killed'`,
      '      ) & )',
      '    fi',
      '  esac',
      'fi',
      `exec '${real}' "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(path, 0o755);
  return path;
}

/**
 * The real criu (`real`), except that while the file `arm` exists, the first restore kills its
 * worker mid-restore: once criu has forked the task it restores (a child of the restorer, as
 * `--restore-sibling` makes it), criu is stopped there, the task's pid written to `arm`.restoring
 * and the worker (the restorer's launcher's parent) SIGKILLed. The arm is used up.
 */
export function workerKillingCriu(real: string, arm: string): string {
  const path = join(tempDir('rw-kill-criu-'), 'criu');
  writeFileSync(
    path,
    [
      '#!/bin/sh',
      `if [ "$1" = restore ] && [ -e '${arm}' ]; then`,
      `  rm -f '${arm}'`,
      '  criu=$$',
      '  restorer=$PPID',
      // Outside criu's process tree, and holding none of the fds criu hands over.
      '  ( ( exec 3>&- 4>&-',
      '    while :; do',
      '      for child in $(cat /proc/$restorer/task/*/children 2>/dev/null); do',
      '        [ "$child" = "$criu" ] && continue',
      '        kill -STOP "$criu"',
      '        stat=$(cat /proc/$restorer/stat); set -- ${stat##*) }; launcher=$2',
      '        stat=$(cat /proc/$launcher/stat); set -- ${stat##*) }; worker=$2',
      `        echo "$child" > '${arm}.restoring'`,
      '        kill -KILL "$worker"',
      '        exit 0',
      '      done',
      '    done',
      '  ) & )',
      'fi',
      `exec '${real}' "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(path, 0o755);
  return path;
}
