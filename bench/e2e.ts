/**
 * End to end through client, nginx, router and worker (all real, as in the end-to-end tests):
 * p50/p99 latency of a trivial Python call on a warm session container, on a new container
 * restored from a checkpoint, and on a cold start, beside a bare gRPC echo through the same hops
 * (a scripted echo worker registered as the only gpu worker; the echo call asks for a GPU).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Flavor } from '../src/proto/gen/readie/v1/registry.js';
import { startE2eCluster } from '../test/support/e2e-cluster.js';
import { PYTHON } from '../test/support/python.js';
import { ROOT } from '../test/support/replay.js';
import { ScriptedWorker } from '../test/support/router/scripted-worker.js';
import { cleanTempDirs } from '../test/support/temp.js';
import { ratio } from './support.js';

const COUNTS = { echo: 300, warm: 300, checkpoint: 150, cold: 30 };

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return Math.round((sorted[index] as number) * 100) / 100;
}

/** Runs the end-to-end benchmark. */
export async function run() {
  const cluster = await startE2eCluster();
  const echo = await ScriptedWorker.start({ workerId: 'bench-echo' });
  let heartbeat: NodeJS.Timeout | undefined;
  try {
    echo.connect(`127.0.0.1:${cluster.routerPort}`, { token: cluster.token });
    await echo.reportStatus({ flavor: Flavor.FLAVOR_GPU, gpuMemoryTotal: 16 * 1024 ** 3 });
    // Its heartbeat, so the router's liveness keeps it through the whole run.
    heartbeat = setInterval(() => void echo.reportUtilization().catch(() => undefined), 1000);
    const run = spawnSync(
      PYTHON,
      [join(ROOT, 'bench', 'scripts', 'e2e_latency.py'), JSON.stringify(COUNTS)],
      {
        env: cluster.clientEnv(),
        encoding: 'utf8',
        timeout: 600_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    if (run.status !== 0) throw new Error(`e2e_latency.py failed: ${run.stderr}`);
    const results = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as Record<
      string,
      number[] | string
    >;
    const stats = (mode: keyof typeof COUNTS) => {
      const values = results[mode] as number[];
      return { calls: values.length, p50Ms: percentile(values, 50), p99Ms: percentile(values, 99) };
    };
    const echoStats = stats('echo');
    const beside = (mode: 'warm' | 'checkpoint' | 'cold') => {
      const own = stats(mode);
      return {
        ...own,
        p50VsEcho: ratio(own.p50Ms, echoStats.p50Ms),
        p99VsEcho: ratio(own.p99Ms, echoStats.p99Ms),
      };
    };
    return {
      path: 'Python client -> nginx (TLS) -> router -> worker -> sandboxed Python',
      echoThroughSameHops: echoStats,
      warmSession: beside('warm'),
      newContainerFromCheckpoint: { ...beside('checkpoint'), checkpoint: results.checkpointUsed },
      coldStart: { ...beside('cold'), checkpoint: results.coldCheckpoint || '(cold)' },
      note: 'a new container from a checkpoint is usually a standby the worker restored ahead of demand (one per checkpoint); a cold start runs disable_optimized_execution calls',
    };
  } finally {
    clearInterval(heartbeat);
    echo.stop();
    await cluster.stop();
    cleanTempDirs();
  }
}
