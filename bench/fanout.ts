/**
 * Fan-out on a local 2-worker cluster (as `npm start` runs it: plaintext on loopback, tokens): 2,000
 * trivial inputs through the Python client's `fn.map`, beside the same calls made one at a time
 * on one warm session and beside an asyncio fan-out of independent calls with 4 in flight, in
 * rounds that alternate the three (this machine's speed drifts). Targets: the map at least 2x the
 * one-session rate and at least 3x the independent fan-out; no failed input.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { startLocalCluster } from '../src/cluster/local-cluster.js';
import { freePort } from '../test/support/e2e-cluster.js';
import { PYTHON } from '../test/support/python.js';
import { ROOT } from '../test/support/replay.js';
import { cleanTempDirs, tempDir } from '../test/support/temp.js';
import { ratio, clientEnv } from './support.js';

const PLAN = { calls: 2000, rounds: 2 };

interface ModeTotal {
  readonly calls: number;
  readonly seconds: number;
  readonly failed: number;
  readonly rounds: number[];
}

/** Runs the fan-out benchmark. */
export async function run() {
  const dir = tempDir('readie-bench-fanout-');
  const port = await freePort();
  const cluster = await startLocalCluster({
    workers: 2,
    stateDir: dir,
    port,
    workerPorts: [await freePort(), await freePort()],
    python: PYTHON,
    numpy: spawnSync(PYTHON, ['-c', 'import numpy']).status === 0,
    workerMemory: '4GiB',
    readyTimeout: 60_000,
  });
  try {
    const child = spawn(
      PYTHON,
      [join(ROOT, 'bench', 'scripts', 'fanout_rate.py'), JSON.stringify(PLAN)],
      {
        env: clientEnv(cluster, dir, ROOT),
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    const [status] = (await once(child, 'close')) as [number | null];
    if (status !== 0) throw new Error(`fanout_rate.py failed (${String(status)})`);
    const totals = JSON.parse(
      Buffer.concat(out).toString('utf8').trim().split('\n').at(-1) ?? '{}',
    ) as Record<'map' | 'session' | 'independent', ModeTotal>;
    const rate = (mode: ModeTotal) => Math.round((mode.calls / mode.seconds) * 10) / 10;
    const figure = (mode: ModeTotal) => ({
      calls: mode.calls,
      callsPerSecond: rate(mode),
      perRound: mode.rounds,
      failed: mode.failed,
    });
    return {
      cluster: '2 workers, 8 containers each, 4 GiB each; calls of 256 MiB',
      map: figure(totals.map),
      oneWarmSession: figure(totals.session),
      independentFourInFlight: figure(totals.independent),
      mapVsOneSession: ratio(rate(totals.map), rate(totals.session)),
      mapVsIndependent: ratio(rate(totals.map), rate(totals.independent)),
      targets: { mapVsOneSession: 2, mapVsIndependent: 3, failed: 0 },
    };
  } finally {
    await cluster.stop();
    cleanTempDirs();
  }
}
