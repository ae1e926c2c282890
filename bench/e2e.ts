/**
 * End to end through client, nginx, router and worker (all real, as in the end-to-end tests):
 * p50/p99 latency of a trivial Python call on a warm session container, on a new container
 * restored from a checkpoint, and on a cold start, beside a bare gRPC echo through the same hops
 * (a scripted echo worker registered as the only gpu worker; the echo call asks for a GPU).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { Flavor } from '../src/proto/gen/readie/v1/registry.js';
import { startE2eCluster } from '../test/support/e2e-cluster.js';
import { PYTHON } from '../test/support/python.js';
import { ROOT } from '../test/support/replay.js';
import { ScriptedWorker } from '../test/support/router/scripted-worker.js';
import { cleanTempDirs } from '../test/support/temp.js';
import { ratio, percentile } from './support.js';

const COUNTS = { echo: 300, warm: 300, checkpoint: 150, cold: 30 };

/**
 * What the calls of one mode ran on: how many containers, which checkpoints (the script has
 * checked them: a new container and a checkpoint for each checkpoint call, none for cold calls,
 * one container for the warm ones).
 */
interface RanOn {
  readonly calls: number;
  readonly containers: number;
  readonly checkpoints: readonly string[];
}

/** Runs the measuring client script to its end, collecting its output (killed after 10 min). */
async function runScript(
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const script = join(ROOT, 'bench', 'scripts', 'e2e_latency.py');
  const child = spawn(PYTHON, [script, JSON.stringify(COUNTS)], { env });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 600_000);
  try {
    const [status] = (await once(child, 'close')) as [number | null];
    const text = (chunks: Buffer[]) => Buffer.concat(chunks).toString('utf8');
    return { status, stdout: text(out), stderr: text(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the end-to-end benchmark. */
export async function run() {
  const cluster = await startE2eCluster({ externalWorkerIds: ['bench-echo'] });
  const echo = await ScriptedWorker.start({ workerId: 'bench-echo' });
  let heartbeat: NodeJS.Timeout | undefined;
  try {
    echo.connect(`127.0.0.1:${cluster.routerPort}`, { token: cluster.workerToken('bench-echo') });
    await echo.reportStatus({ flavor: Flavor.FLAVOR_GPU, gpuMemoryTotal: 16 * 1024 ** 3 });
    // Its heartbeat, so the router's liveness keeps it through the whole run.
    heartbeat = setInterval(() => void echo.reportUtilization().catch(() => undefined), 1000);
    // Not spawnSync: the scripted echo worker lives in this process and must keep serving.
    const run = await runScript(cluster.clientEnv());
    if (run.status !== 0) {
      throw new Error(`e2e_latency.py failed (${String(run.status)}): ${run.stderr}`);
    }
    const results = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as Record<
      keyof typeof COUNTS,
      number[]
    > & { ranOn: Record<'warm' | 'checkpoint' | 'cold', RanOn> };
    const stats = (mode: keyof typeof COUNTS) => {
      const values = results[mode];
      const ms = (fraction: number) => Math.round(percentile(values, fraction) * 100) / 100;
      return { calls: values.length, p50Ms: ms(0.5), p99Ms: ms(0.99) };
    };
    const echoStats = stats('echo');
    const beside = (mode: 'warm' | 'checkpoint' | 'cold') => {
      const own = stats(mode);
      return {
        ...own,
        p50VsEcho: ratio(own.p50Ms, echoStats.p50Ms),
        p99VsEcho: ratio(own.p99Ms, echoStats.p99Ms),
        ...results.ranOn[mode],
      };
    };
    return {
      path: 'Python client -> nginx (TLS) -> router -> worker -> sandboxed Python',
      echoThroughSameHops: echoStats,
      warmSession: beside('warm'),
      newContainerFromCheckpoint: beside('checkpoint'),
      coldStart: beside('cold'),
      note: 'a new container from a checkpoint is usually a standby the worker restored ahead of demand (one per checkpoint); a cold start runs disable_optimized_execution calls',
    };
  } finally {
    clearInterval(heartbeat);
    echo.stop();
    await cluster.stop();
    cleanTempDirs();
  }
}
