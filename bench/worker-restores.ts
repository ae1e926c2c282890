/**
 * The worker's restore paths side by side, in one run: a cold start, the template backend and the
 * CRIU backend, each from a standby and on demand, for a numpy checkpoint; memory per container;
 * image size and dump time per checkpoint; and a heavy checkpoint (numpy plus 300 MB of arrays
 * built by its setup, standing in for a model), where CRIU restores from disk with nothing
 * resident while the template backend keeps a resident template.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import { WorkerStatus } from '../src/proto/gen/readie/v1/registry.js';
import type { CheckpointBuild } from '../src/worker/checkpoints/index.js';
import { CATALOGUE } from '../test/support/catalogues.js';
import type { ScriptedRouter } from '../test/support/scripted-router.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  type Harness,
} from '../test/support/worker-harness.js';
import { collectGarbage, median, percentile, ratio } from './support.js';

const ROUNDS = 30;
const HEAVY_ROUNDS = 11;
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** A call that uses numpy (45): what every first-call path runs. */
export const NUMPY_CALL = jsonCall(
  'def f():\n    import numpy\n    return int(numpy.arange(10).sum())\n',
  'f',
);

/** The heavy checkpoint's data: 300 MB of float64 arrays, built the same way cold and in setup. */
const BUILD_WEIGHTS = py`
  import numpy
  rng = numpy.random.default_rng(0)
  weights = [rng.standard_normal(3_276_800) for _ in range(12)]
`;
const HEAVY: CheckpointBuild = { id: 'ckpt-heavy', modules: ['numpy'], setup: BUILD_WEIGHTS };
const HEAVY_RESTORED_CALL = jsonCall(
  py`
    def f():
        import readie_checkpoint
        return round(float(readie_checkpoint.weights[0][0]), 6)
  `,
  'f',
);
const HEAVY_COLD_CALL = jsonCall(
  `${BUILD_WEIGHTS}\ndef f():\n    return round(float(weights[0][0]), 6)\n`,
  'f',
);

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function spread(times: readonly number[]) {
  return { p50Ms: round(median(times)), p99Ms: round(percentile(times, 0.99)) };
}

/** Dump figures from the worker's own log lines ('checkpoint dumped with criu'). */
interface Dump {
  checkpointId: string;
  imageBytes: number;
  dumpMs: number;
  importMs: number;
}

function dumpLog(dumps: Dump[]): Logger {
  return pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as Dump & { msg: string };
        if (entry.msg === 'checkpoint dumped with criu') {
          const { checkpointId, imageBytes, dumpMs, importMs } = entry;
          dumps.push({
            checkpointId,
            imageBytes,
            dumpMs: round(dumpMs),
            importMs: round(importMs),
          });
        }
      },
    },
  );
}

/** Time from the call's start to its answer, on a new container; checks what served it. */
export async function firstCall(
  harness: Harness,
  checkpointId: string,
  payload: Buffer,
  expected: unknown,
  memory = 512 * MiB,
): Promise<number> {
  await harness.worker.pool!.settled();
  collectGarbage();
  const result = await execute(harness.client, header({ ids: { checkpointId }, memory }), payload);
  if (envelopeOf(result).value !== expected || result.ids?.checkpointId !== checkpointId) {
    throw new Error(`unexpected first call: ${JSON.stringify(result.ids)} ${result.details}`);
  }
  await harness.worker.pool!.settled();
  return result.endedAt - result.startedAt;
}

/**
 * The memory cgroup usage of an idle session container after one call, `settleMs` later (a lazy
 * restore goes on copying memory in after the call).
 */
async function containerBytes(
  harness: Harness,
  checkpointId: string,
  payload: Buffer,
  settleMs = 0,
): Promise<number> {
  const sessionId = `bench-memory-${checkpointId || 'cold'}`;
  const result = await execute(
    harness.client,
    header({ ids: { checkpointId, sessionId }, memory: GiB }),
    payload,
  );
  envelopeOf(result);
  const container = harness.worker.pool!.list().find((c) => c.id === result.ids!.containerId)!;
  await sleep(settleMs);
  const bytes = await container.cgroup.usage();
  await harness.worker.pool!.destroy(container);
  return bytes;
}

/** Runs the restore benchmark against workers registered with `router`. */
export async function restores(router: ScriptedRouter) {
  const dumps: Dump[] = [];
  const start = (backend: 'template' | 'criu', standby: string, log?: Logger) =>
    startHarness({
      router,
      catalogue: CATALOGUE,
      ...(log ? { log } : {}),
      flags: { maxContainers: '0', restoreBackend: backend, standby },
      tuning: { templateBuildTimeoutMs: 300_000 },
    });
  const harnesses: Harness[] = [];
  try {
    const templateStandby = await start('template', '1');
    harnesses.push(templateStandby);
    const templateOnDemand = await start('template', '0');
    harnesses.push(templateOnDemand);
    const criuStandby = await start('criu', '1', dumpLog(dumps));
    harnesses.push(criuStandby);
    if (criuStandby.worker.status !== WorkerStatus.WORKER_STATUS_READY) {
      return { criuUnusable: criuStandby.worker.problem };
    }
    const criuOnDemand = await start('criu', '0', dumpLog(dumps));
    harnesses.push(criuOnDemand);

    // Warm every path once, then alternate: this machine's speed drifts.
    const paths = {
      cold: () => firstCall(templateStandby, '', NUMPY_CALL, 45),
      templateFromStandby: () => firstCall(templateStandby, 'ckpt-numpy', NUMPY_CALL, 45),
      templateOnDemand: () => firstCall(templateOnDemand, 'ckpt-numpy', NUMPY_CALL, 45),
      criuFromStandby: () => firstCall(criuStandby, 'ckpt-numpy', NUMPY_CALL, 45),
      criuOnDemand: () => firstCall(criuOnDemand, 'ckpt-numpy', NUMPY_CALL, 45),
    };
    const times = Object.fromEntries(Object.keys(paths).map((name) => [name, [] as number[]]));
    for (const path of Object.values(paths)) await path();
    for (let i = 0; i < ROUNDS; i += 1) {
      for (const [name, path] of Object.entries(paths)) times[name]!.push(await path());
    }
    const p50 = (name: keyof typeof paths) => median(times[name]!);
    const coldOver = (name: keyof typeof paths) => ratio(p50('cold'), p50(name));

    const memory = {
      coldBytes: await containerBytes(templateOnDemand, '', NUMPY_CALL),
      templateBytes: await containerBytes(templateOnDemand, 'ckpt-numpy', NUMPY_CALL),
      criuBytes: await containerBytes(criuOnDemand, 'ckpt-numpy', NUMPY_CALL),
    };

    // The heavy checkpoint on all four workers: on demand (nothing on standby) and from a standby
    // (the CRIU worker keeps a restored container, the template worker its template and a fork).
    for (const harness of [criuOnDemand, templateOnDemand, criuStandby, templateStandby]) {
      await harness.worker.buildCheckpoint(HEAVY);
    }
    const expected = envelopeOf(
      await execute(criuOnDemand.client, header({ memory: GiB }), HEAVY_COLD_CALL),
    ).value;
    const heavyCall = (harness: Harness) => () =>
      firstCall(harness, 'ckpt-heavy', HEAVY_RESTORED_CALL, expected, GiB);
    const heavyCold = () => firstCall(criuOnDemand, '', HEAVY_COLD_CALL, expected, GiB);
    // A standby is restocked after its call (a lazy CRIU restore then copies 334 MB in): the next
    // timed call waits for that, so no path runs beside another's refill.
    const refilled = async (harness: Harness) => {
      const ms = await heavyCall(harness)();
      await harness.worker.pool!.settled();
      await sleep(1_500);
      return ms;
    };
    type HeavyPath = 'cold' | 'template' | 'criu' | 'templateFromStandby' | 'criuFromStandby';
    // Two phases, each alternating its paths with cold starts: on demand, then from a standby.
    const phases: Partial<Record<HeavyPath, () => Promise<number>>>[] = [
      { cold: heavyCold, template: heavyCall(templateOnDemand), criu: heavyCall(criuOnDemand) },
      {
        cold: heavyCold,
        templateFromStandby: () => refilled(templateStandby),
        criuFromStandby: () => refilled(criuStandby),
      },
    ];
    const heavyTimes: Record<HeavyPath, number[]> = {
      cold: [],
      template: [],
      criu: [],
      templateFromStandby: [],
      criuFromStandby: [],
    };
    for (const paths of phases) {
      for (const path of Object.values(paths)) await path();
      for (let i = 0; i < HEAVY_ROUNDS; i += 1) {
        for (const [name, path] of Object.entries(paths)) {
          heavyTimes[name as HeavyPath].push(await path());
        }
      }
    }
    const heavyP50 = (name: HeavyPath) => median(heavyTimes[name]);
    const heavyDump = dumps.find((dump) => dump.checkpointId === 'ckpt-heavy');
    const heavy = {
      what: 'numpy plus 300 MB of float64 arrays built by the checkpoint setup (standing in for loading a model); a cold start builds the same arrays; restores on demand (--standby 0; the CRIU image restores lazily) and from a standby (--standby 1), p50/p99 of alternating rounds',
      rounds: HEAVY_ROUNDS,
      coldStart: spread(heavyTimes.cold),
      templateOnDemand: spread(heavyTimes.template),
      criuOnDemand: spread(heavyTimes.criu),
      templateFromStandby: spread(heavyTimes.templateFromStandby),
      criuFromStandby: spread(heavyTimes.criuFromStandby),
      coldOverCriu: ratio(heavyP50('cold'), heavyP50('criu')),
      coldOverTemplate: ratio(heavyP50('cold'), heavyP50('template')),
      coldOverCriuFromStandby: ratio(heavyP50('cold'), heavyP50('criuFromStandby')),
      coldOverTemplateFromStandby: ratio(heavyP50('cold'), heavyP50('templateFromStandby')),
      residentBytes: {
        template: await templateOnDemand.worker.backend!.residentBytes('ckpt-heavy'),
        criu: await criuOnDemand.worker.backend!.residentBytes('ckpt-heavy'),
        note: "what each backend keeps in memory for the checkpoint between calls, besides standby containers: the template process, or nothing (CRIU's image is on disk: the cached tier). From a standby, the CRIU worker holds one restored container (its own copy); the template worker holds its template and a forked container",
      },
      perContainerBytes: {
        template: await containerBytes(templateOnDemand, 'ckpt-heavy', HEAVY_RESTORED_CALL),
        criu: await containerBytes(criuOnDemand, 'ckpt-heavy', HEAVY_RESTORED_CALL, 3_000),
        note: "a forked container shares its template's pages; a restored one holds its own copy (measured 3 s after the call: a lazy restore copies the rest in after it)",
      },
      imageBytes: heavyDump?.imageBytes ?? null,
      dumpMs: heavyDump?.dumpMs ?? null,
      setupMs: heavyDump?.importMs ?? null,
      target: 'cold start / criu restore >= 10, checked on demand and from a standby',
      targetMetOnDemand: heavyP50('cold') / heavyP50('criu') >= 10,
      targetMetFromStandby: heavyP50('cold') / heavyP50('criuFromStandby') >= 10,
    };

    return {
      firstCall: {
        what: 'new container to an answered call that uses numpy, end to end over gRPC; p50/p99 of alternating rounds',
        rounds: ROUNDS,
        coldStart: spread(times['cold']!),
        template: {
          fromStandby: spread(times['templateFromStandby']!),
          onDemand: spread(times['templateOnDemand']!),
        },
        criu: {
          backend: criuStandby.worker.backend?.description,
          fromStandby: spread(times['criuFromStandby']!),
          onDemand: spread(times['criuOnDemand']!),
        },
        coldOverTemplateFromStandby: coldOver('templateFromStandby'),
        coldOverTemplateOnDemand: coldOver('templateOnDemand'),
        coldOverCriuFromStandby: coldOver('criuFromStandby'),
        coldOverCriuOnDemand: coldOver('criuOnDemand'),
        note: 'fromStandby: the default --standby 1, the container restored before the timer started; onDemand: --standby 0, the fork or criu restore inside the timed call',
        targets: {
          criuAtLeast4x: 'cold start / criu restore >= 4, checked on demand and from a standby',
          criuMetOnDemand: p50('cold') / p50('criuOnDemand') >= 4,
          criuMetFromStandby: p50('cold') / p50('criuFromStandby') >= 4,
          templateAtLeast10x: 'cold start / template restore >= 10, checked for both',
          templateMetOnDemand: p50('cold') / p50('templateOnDemand') >= 10,
          templateMetFromStandby: p50('cold') / p50('templateFromStandby') >= 10,
        },
      },
      memoryPerContainer: {
        what: "memory cgroup usage of an idle session container after one numpy call (the restored pages are charged to the container's cgroup)",
        ...memory,
      },
      images: dumps.filter(
        (dump, index) =>
          dump.checkpointId !== 'probe' &&
          dumps.findIndex((other) => other.checkpointId === dump.checkpointId) === index,
      ),
      heavyCheckpoint: heavy,
    };
  } finally {
    for (const harness of harnesses.reverse()) await harness.stop();
  }
}
