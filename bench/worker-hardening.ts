/**
 * What the hardened sandbox costs a container's start, with both restore backends: each path
 * (a cold start; a template fork and a CRIU restore, each from a standby and on demand) runs on a
 * worker with the hardened sandbox, on one with the sandbox as it was before its hardening
 * (`WorkerTuning.sandboxHardening: false`: one shared uid, the host's network, no cgroup or devpts
 * namespace, no pids limit, no seccomp filter; a baseline, never a product setting), and on one
 * with `--network egress` (a slirp4netns per container), in alternating rounds of one run.
 */
import { WorkerStatus } from '../src/proto/gen/readie/v1/registry.js';
import { CATALOGUE } from '../test/support/catalogues.js';
import type { ScriptedRouter } from '../test/support/scripted-router.js';
import { startHarness, type Harness } from '../test/support/worker-harness.js';
import { median, percentile, ratio } from './support.js';
import { firstCall, NUMPY_CALL } from './worker-restores.js';

const ROUNDS = 41;
const CHECKPOINT = 'ckpt-numpy';

/** The three sandboxes compared. */
const SANDBOXES = {
  hardened: { flags: {}, tuning: {} },
  unhardened: { flags: {}, tuning: { sandboxHardening: false } },
  egress: { flags: { network: 'egress' }, tuning: {} },
} as const;
type Sandbox = keyof typeof SANDBOXES;

/** The starts measured in each sandbox. */
const STARTS = [
  'cold',
  'templateFromStandby',
  'templateOnDemand',
  'criuFromStandby',
  'criuOnDemand',
] as const;
type Start = (typeof STARTS)[number];

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** Runs the hardening benchmark against workers registered with `router`. */
export async function hardening(router: ScriptedRouter) {
  const harnesses: Harness[] = [];
  const start = async (sandbox: Sandbox, backend: 'template' | 'criu', standby: string) => {
    const harness = await startHarness({
      router,
      catalogue: CATALOGUE,
      flags: {
        maxContainers: '0',
        restoreBackend: backend,
        standby,
        ...SANDBOXES[sandbox].flags,
      },
      tuning: { templateBuildTimeoutMs: 300_000, ...SANDBOXES[sandbox].tuning },
    });
    harnesses.push(harness);
    if (harness.worker.status !== WorkerStatus.WORKER_STATUS_READY) {
      throw new Error(`${sandbox} ${backend} worker: ${harness.worker.problem}`);
    }
    return harness;
  };
  try {
    const calls = new Map<string, () => Promise<number>>();
    for (const sandbox of Object.keys(SANDBOXES) as Sandbox[]) {
      const templateStandby = await start(sandbox, 'template', '1');
      const templateOnDemand = await start(sandbox, 'template', '0');
      const criuStandby = await start(sandbox, 'criu', '1');
      const criuOnDemand = await start(sandbox, 'criu', '0');
      const call = (harness: Harness, checkpointId: string) => () =>
        firstCall(harness, checkpointId, NUMPY_CALL, 45);
      calls.set(`${sandbox}.cold`, call(templateOnDemand, ''));
      calls.set(`${sandbox}.templateFromStandby`, call(templateStandby, CHECKPOINT));
      calls.set(`${sandbox}.templateOnDemand`, call(templateOnDemand, CHECKPOINT));
      calls.set(`${sandbox}.criuFromStandby`, call(criuStandby, CHECKPOINT));
      calls.set(`${sandbox}.criuOnDemand`, call(criuOnDemand, CHECKPOINT));
    }
    const key = (sandbox: Sandbox, name: Start) => `${sandbox}.${name}`;
    const times = new Map([...calls.keys()].map((name) => [name, [] as number[]]));
    // Warm every path once, then rounds: in each, a start runs in the three sandboxes back to
    // back (in an order that rotates from round to round), so that each comparison is of
    // neighbours in time: this machine's speed drifts.
    for (const call of calls.values()) await call();
    const sandboxes = Object.keys(SANDBOXES) as Sandbox[];
    for (let i = 0; i < ROUNDS; i += 1) {
      const order = [...sandboxes.slice(i % 3), ...sandboxes.slice(0, i % 3)];
      for (const name of STARTS) {
        for (const sandbox of order) {
          times.get(key(sandbox, name))!.push(await calls.get(key(sandbox, name))!());
        }
      }
    }
    const of = (sandbox: Sandbox, name: Start) => times.get(key(sandbox, name))!;
    const p50 = (sandbox: Sandbox, name: Start) => median(of(sandbox, name));
    /** The median of the round-by-round differences: robust to drift between rounds. */
    const pairedAdded = (sandbox: Sandbox, baseline: Sandbox, name: Start) =>
      median(of(sandbox, name).map((ms, index) => ms - of(baseline, name)[index]!));
    const compare = (sandbox: Sandbox, baseline: Sandbox) =>
      Object.fromEntries(
        STARTS.map((name) => [
          name,
          {
            p50Ms: round(p50(sandbox, name)),
            p99Ms: round(percentile(of(sandbox, name), 0.99)),
            baselineP50Ms: round(p50(baseline, name)),
            addedMs: round(pairedAdded(sandbox, baseline, name)),
            ratio: ratio(p50(sandbox, name), p50(baseline, name)),
          },
        ]),
      );
    const added = (name: Start) => pairedAdded('hardened', 'unhardened', name);
    const coldOver = (name: Start) => ratio(p50('hardened', 'cold'), p50('hardened', name));
    return {
      what: 'new container to an answered numpy call, end to end over gRPC, p50/p99 of rounds: the hardened sandbox (own uid, network, cgroup and devpts namespaces, pids limit, seccomp filter) beside the sandbox before it, and --network egress beside none, for a cold start and both restore backends, from a standby and on demand',
      addedMsNote:
        'the median of the round-by-round differences (each start ran in the compared sandboxes back to back), not the difference of the p50s',
      rounds: ROUNDS,
      hardenedOverUnhardened: compare('hardened', 'unhardened'),
      egressOverNone: compare('egress', 'hardened'),
      coldOverHardenedRestore: {
        templateFromStandby: coldOver('templateFromStandby'),
        templateOnDemand: coldOver('templateOnDemand'),
        criuFromStandby: coldOver('criuFromStandby'),
        criuOnDemand: coldOver('criuOnDemand'),
      },
      targets: {
        hardeningAtMost5ms:
          'hardened addedMs <= 5 for a checkpoint start, each backend, from a standby and on demand',
        hardeningMet: {
          templateFromStandby: added('templateFromStandby') <= 5,
          templateOnDemand: added('templateOnDemand') <= 5,
          criuFromStandby: added('criuFromStandby') <= 5,
          criuOnDemand: added('criuOnDemand') <= 5,
        },
        standbyAtLeast10x: 'hardened cold start / hardened restore from a standby >= 10',
        standbyMet: {
          template: p50('hardened', 'cold') / p50('hardened', 'templateFromStandby') >= 10,
          criu: p50('hardened', 'cold') / p50('hardened', 'criuFromStandby') >= 10,
        },
      },
      note: 'a standby gets its namespaces, limits and (in the egress mode) its slirp4netns before a call arrives; on demand, all of it is inside the timed call',
    };
  } finally {
    for (const harness of harnesses.reverse()) await harness.stop();
  }
}
