/**
 * readie's map beside its peers, in one process tree and one run (`npm run bench -- fanout-peers`,
 * as root): a local 2-worker cluster (8 containers each, as `npm start` runs it, clients dialing
 * the router on loopback) and one Python process (`scripts/fanout_peers.py`) that runs, round by
 * round and in turn, readie's `fn.map`, `multiprocessing.Pool.map`, `ProcessPoolExecutor.map`
 * (default chunksize, and 100) and dask.distributed (a LocalCluster of 2 worker processes; Debian's
 * python3-distributed) on three workloads: trivial inputs (`x * 2`), small numpy inputs (an array
 * of 64 floats each) and inputs that sleep 50 ms (peers then get as many processes or threads as
 * the cluster has slots). The pools and dask start their processes before the clock; readie runs
 * one map of each sleeping function before it (its workers then keep standbys for the demand they
 * saw, and a later map of a function starts from the inputs' times the last one measured), whose
 * rates are reported apart (`sleepFirstMapVsSlotLimit`, `sleepMaxInputs8FirstMapVsSlotLimit`). Also: readie's time to its first result, its CPU per input in the
 * client, the router and the workers (the workers' Node processes and their containers, from a
 * cpuacct cgroup the benchmark puts the cluster in), and the p50 of a plain call beside a call in
 * a session, one at a time.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startLocalCluster, type LocalCluster } from '../src/cluster/local-cluster.js';
import { freePort } from '../test/support/e2e-cluster.js';
import { PYTHON } from '../test/support/python.js';
import { ROOT } from '../test/support/replay.js';
import { cleanTempDirs, tempDir } from '../test/support/temp.js';
import { ratio, clientEnv } from './support.js';

const PLAN = {
  trivial: Number(process.env['FANOUT_TRIVIAL'] ?? 20_000),
  numpy: Number(process.env['FANOUT_NUMPY'] ?? 5_000),
  sleep: Number(process.env['FANOUT_SLEEP'] ?? 400),
  sleepSeconds: 0.05,
  rounds: Number(process.env['FANOUT_ROUNDS'] ?? 3),
  plainCalls: Number(process.env['FANOUT_PLAIN_CALLS'] ?? 100),
  slots: 16,
};

type Contender =
  'readie' | 'readieMaxInputs8' | 'poolMap' | 'processPoolDefault' | 'processPoolChunk100' | 'dask';

interface Round {
  readonly seconds: number;
  readonly wrong: number;
  readonly first?: number;
  readonly clientCpu?: number;
}

interface ScriptResult {
  readonly sizes: Record<string, number>;
  readonly rounds: Record<string, Partial<Record<Contender, Round[]>>>;
  readonly plainP50Ms: number;
  readonly sessionP50Ms: number;
  readonly plainCalls: number;
  readonly firstSleepMap: Round;
  readonly firstSleepMapMaxInputs8: Round | null;
}

/** CPU seconds of one process (all its threads), from /proc. */
function processCpu(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/**
 * A cpuacct cgroup (v1) or a cgroup2 directory the cluster's processes are started in, so that
 * the CPU of every process under the workers (templates, restores, containers, even those
 * destroyed meanwhile) is counted.
 */
class CpuGroup {
  readonly dir: string;
  private readonly v2: boolean;

  constructor(name: string) {
    this.v2 = !existsSync('/sys/fs/cgroup/cpuacct');
    this.dir = this.v2 ? join('/sys/fs/cgroup', name) : join('/sys/fs/cgroup/cpuacct', name);
    mkdirSync(this.dir, { recursive: true });
  }

  /** Moves a process (all its threads) into the group. */
  enter(pid: number): void {
    writeFileSync(join(this.dir, 'cgroup.procs'), `${pid}\n`);
  }

  /** CPU seconds used by the group's processes so far, the exited ones included. */
  seconds(): number {
    if (this.v2) {
      const line = readFileSync(join(this.dir, 'cpu.stat'), 'utf8')
        .split('\n')
        .find((entry) => entry.startsWith('usage_usec'));
      return Number(line?.split(' ')[1] ?? 0) / 1e6;
    }
    return Number(readFileSync(join(this.dir, 'cpuacct.usage'), 'utf8').trim()) / 1e9;
  }

  remove(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      // still in use: left for the next run's cleanup
    }
  }
}

interface CpuSample {
  readonly router: number;
  readonly workerProcesses: number;
  readonly cluster: number;
}

function sample(cluster: LocalCluster, group: CpuGroup): CpuSample {
  return {
    router: processCpu(cluster.routerProcesses.get('router')?.pid),
    workerProcesses: [...cluster.workerProcesses.values()].reduce(
      (sum, child) => sum + processCpu(child.pid),
      0,
    ),
    cluster: group.seconds(),
  };
}

const rounded = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

/** Runs the benchmark. */
export async function run() {
  const dir = tempDir('readie-bench-peers-');
  const port = await freePort();
  const group = new CpuGroup(`readie-bench-peers-${process.pid}`);
  const home = new CpuGroup(`readie-bench-peers-${process.pid}-bench`);
  // The cluster's processes start in `group`; this process goes back to its own afterwards.
  group.enter(process.pid);
  let cluster: LocalCluster;
  try {
    cluster = await startLocalCluster({
      workers: 2,
      stateDir: dir,
      port,
      workerPorts: [await freePort(), await freePort()],
      python: PYTHON,
      numpy: spawnSync(PYTHON, ['-c', 'import numpy']).status === 0,
      workerMemory: '4GiB',
      readyTimeout: 120_000,
    });
  } finally {
    home.enter(process.pid);
  }
  const cpu: Record<string, { router: number; worker: number; containers: number }> = {};
  try {
    const child = spawn(
      PYTHON,
      [join(ROOT, 'bench', 'scripts', 'fanout_peers.py'), JSON.stringify(PLAN)],
      {
        env: clientEnv(cluster, dir, ROOT),
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const lines: string[] = [];
    const started = new Map<string, CpuSample>();
    const reading = (async () => {
      for await (const line of createInterface({ input: child.stdout })) {
        if (!line.startsWith('MARK ')) {
          lines.push(line);
          continue;
        }
        const [phase, edge] = line.slice(5).split(':') as [string, string];
        const now = sample(cluster, group);
        if (edge === 'start') started.set(phase, now);
        else {
          const before = started.get(phase)!;
          const total = (cpu[phase] ??= { router: 0, worker: 0, containers: 0 });
          total.router += now.router - before.router;
          total.worker += now.workerProcesses - before.workerProcesses;
          total.containers +=
            now.cluster -
            before.cluster -
            (now.router - before.router) -
            (now.workerProcesses - before.workerProcesses);
        }
        child.stdin.write('\n');
      }
    })();
    const [status] = (await once(child, 'close')) as [number | null];
    await reading;
    if (status !== 0) throw new Error(`fanout_peers.py failed (${String(status)})`);
    const result = JSON.parse(lines.at(-1) ?? '{}') as ScriptResult;
    return summarize(result, cpu);
  } finally {
    await cluster.stop();
    group.remove();
    home.remove();
    cleanTempDirs();
  }
}

function summarize(
  result: ScriptResult,
  cpu: Record<string, { router: number; worker: number; containers: number }>,
) {
  const rate = (workload: string, contender: Contender): number | null => {
    const rounds = result.rounds[workload]?.[contender];
    if (!rounds || rounds.length === 0) return null;
    const seconds = rounds.reduce((sum, round) => sum + round.seconds, 0);
    return Math.round((result.sizes[workload]! * rounds.length) / seconds);
  };
  const perRound = (workload: string, contender: Contender) =>
    (result.rounds[workload]?.[contender] ?? []).map((round) =>
      Math.round(result.sizes[workload]! / round.seconds),
    );
  const wrong = (workload: string, contender: Contender) =>
    (result.rounds[workload]?.[contender] ?? []).reduce((sum, round) => sum + round.wrong, 0);
  const contenders: Contender[] = [
    'readie',
    'readieMaxInputs8',
    'poolMap',
    'processPoolDefault',
    'processPoolChunk100',
    'dask',
  ];
  const workloads = Object.fromEntries(
    Object.keys(result.rounds).map((workload) => [
      workload,
      Object.fromEntries(
        contenders
          .filter((contender) => rate(workload, contender) !== null)
          .map((contender) => [
            contender,
            {
              inputsPerSecond: rate(workload, contender),
              perRound: perRound(workload, contender),
              wrongResults: wrong(workload, contender),
            },
          ]),
      ),
    ]),
  );
  const readieCpu = (workload: string, phase: string) => {
    const rounds =
      result.rounds[workload]?.[phase === 'readie-sleep8' ? 'readieMaxInputs8' : 'readie'] ?? [];
    const inputs = result.sizes[workload]! * rounds.length;
    const client = rounds.reduce((sum, round) => sum + (round.clientCpu ?? 0), 0);
    const hop = cpu[phase] ?? { router: 0, worker: 0, containers: 0 };
    const ms = (seconds: number) => rounded((seconds * 1000) / Math.max(1, inputs), 4);
    return {
      client: ms(client),
      router: ms(hop.router),
      workerProcesses: ms(hop.worker),
      containers: ms(hop.containers),
      total: ms(client + hop.router + hop.worker + hop.containers),
    };
  };
  const firsts = (result.rounds['trivial']?.readie ?? []).map((round) =>
    rounded((round.first ?? NaN) * 1000),
  );
  const slotLimit = PLAN.slots / PLAN.sleepSeconds;
  const firstMapRatio = (round: Round | null) =>
    round === null
      ? null
      : ratio(round.wrong === 0 ? result.sizes['sleep']! / round.seconds : 0, slotLimit);
  const trivial = rate('trivial', 'readie') ?? 0;
  const numpy = rate('numpy', 'readie') ?? 0;
  const sleep = rate('sleep', 'readie') ?? 0;
  const sleep8 = rate('sleep', 'readieMaxInputs8');
  return {
    cluster:
      '2 workers, 8 containers each (16 slots), 4 GiB each, calls of 256 MiB; clients dial the router on loopback',
    peers:
      'Pool and ProcessPoolExecutor with os.cpu_count() processes (16 for the sleeping workload); dask.distributed LocalCluster of 2 worker processes, 1 thread each (8 each for the sleeping workload), client.map(pure=False) + gather; pools and dask started and warmed before the clock; readie warmed by one map of each sleeping function before the clock (their rates: sleepFirstMapVsSlotLimit, sleepMaxInputs8FirstMapVsSlotLimit)',
    sizes: result.sizes,
    rounds: PLAN.rounds,
    workloads,
    trivialVsDask: ratio(trivial, rate('trivial', 'dask') ?? NaN),
    trivialVsProcessPoolDefault: ratio(trivial, rate('trivial', 'processPoolDefault') ?? NaN),
    numpyVsDask: ratio(numpy, rate('numpy', 'dask') ?? NaN),
    numpyVsProcessPoolDefault: ratio(numpy, rate('numpy', 'processPoolDefault') ?? NaN),
    slotLimitPerSecond: slotLimit,
    sleepVsSlotLimit: ratio(sleep, slotLimit),
    sleepMaxInputs8VsSlotLimit: sleep8 === null ? null : ratio(sleep8, slotLimit),
    sleepFirstMapVsSlotLimit: firstMapRatio(result.firstSleepMap),
    sleepMaxInputs8FirstMapVsSlotLimit: firstMapRatio(result.firstSleepMapMaxInputs8),
    timeToFirstResultMs: { trivial: firsts },
    cpuPerInputMs: {
      trivial: readieCpu('trivial', 'readie-trivial'),
      numpy: readieCpu('numpy', 'readie-numpy'),
      sleep: readieCpu('sleep', 'readie-sleep'),
      ...(sleep8 === null ? {} : { sleepMaxInputs8: readieCpu('sleep', 'readie-sleep8') }),
    },
    plainCallP50Ms: rounded(result.plainP50Ms, 2),
    sessionCallP50Ms: rounded(result.sessionP50Ms, 2),
    plainVsSessionP50: ratio(result.plainP50Ms, result.sessionP50Ms),
    plainCalls: result.plainCalls,
    targets: {
      trivialVsDask: 10,
      trivialVsProcessPoolDefault: 1,
      numpyVsDask: 5,
      sleepVsSlotLimit: 0.9,
      sleepMaxInputs8VsSlotLimit: 4,
      timeToFirstResultMs: 50,
      cpuPerInputMsTrivial: 0.3,
      plainVsSessionP50: 2,
    },
  };
}
