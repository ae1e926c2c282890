/**
 * Images (docs/images.md) against today's per-call install, in one run on one worker (the CRIU
 * backend where it works here, else the template backend; no standbys; packages from pip's own
 * configuration on this host): for each package, the first call with an image (it builds the
 * image), later calls (they restore it: from its memory snapshot with CRIU; else a container from
 * the catalogue checkpoint with the image's prefix bound, its modules imported), a call with
 * the same requirement as `packages=` (fetched and installed into every new container, as before
 * images), and the catalogue checkpoint's own restore with nothing installed (the floor).
 * `READIE_BENCH_IMAGE_PACKAGES` names the packages (`requirement:module`, comma-separated;
 * default a tiny pure-Python wheel, `tomli-w==1.2.0:tomli_w`; add `pandas:pandas` for a heavy one).
 */
import { status } from '@grpc/grpc-js';
import type { Catalogue } from '../src/events/catalogue.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  startHarness,
  type CallResult,
  type Harness,
} from '../test/support/worker-harness.js';
import { imageBytes } from '../src/worker/images/index.js';
import { median, ratio } from './support.js';

const RESTORE_ROUNDS = 10;
const INSTALL_ROUNDS = 3;
const BUILDS = 2;
const CHECKPOINT = 'checkpoint_0';
const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [{ id: CHECKPOINT, modules: [], restoreCost: 60 }],
    },
  },
  importCosts: {},
  defaultImportCost: 100,
};

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

function elapsed(result: CallResult, what: string): number {
  const envelope = envelopeOf(result);
  if (result.code !== status.OK || envelope.ok !== true) {
    throw new Error(`${what} failed: ${result.details} ${JSON.stringify(envelope.error)}`);
  }
  return result.endedAt - result.startedAt;
}

async function measure(harness: Harness, requirement: string, module: string) {
  const call = jsonCall(`def f():\n    import ${module}\n    return ${module}.__name__\n`, 'f');
  const image = { packages: [requirement], imports: [module], env: {} };
  const ids = { checkpointId: CHECKPOINT };
  const memory = 2 * 1024 ** 3;
  const builds: number[] = [];
  const restores: number[] = [];
  for (let tenant = 0; tenant < BUILDS; tenant += 1) {
    const tenantId = `bench-${module}-${tenant}`;
    builds.push(
      elapsed(
        await execute(harness.client, header({ ids, memory, image, tenantId }), call),
        'build',
      ),
    );
    for (let round = 0; round < RESTORE_ROUNDS / BUILDS; round += 1) {
      const result = await execute(harness.client, header({ ids, memory, image, tenantId }), call);
      restores.push(elapsed(result, 'restore'));
      if (!result.responses.at(-1)?.response.ids?.checkpointId.startsWith('image:')) {
        throw new Error('a restore did not name its image');
      }
    }
  }
  const installs: number[] = [];
  for (let round = 0; round < INSTALL_ROUNDS; round += 1) {
    installs.push(
      elapsed(
        await execute(harness.client, header({ ids, memory, packages: [requirement] }), call),
        'install',
      ),
    );
  }
  const catalogue: number[] = [];
  const bare = jsonCall('def f():\n    return "bare"\n', 'f');
  for (let round = 0; round < RESTORE_ROUNDS; round += 1) {
    catalogue.push(elapsed(await execute(harness.client, header({ ids, memory }), bare), 'bare'));
  }
  const restoreMs = median(restores);
  const installMs = median(installs);
  const catalogueMs = median(catalogue);
  const held = harness.worker.images!.list().find((image) => image.manifest.imports[0] === module);
  return {
    requirement,
    imageBytes: held ? imageBytes(held) : null,
    snapshotBytes: held?.snapshot?.snapshot.bytes ?? null,
    buildMs: round(median(builds)),
    restoreP50Ms: round(restoreMs),
    perCallInstallP50Ms: round(installMs),
    catalogueRestoreP50Ms: round(catalogueMs),
    installOverRestore: ratio(installMs, restoreMs),
    restoreOverCatalogue: ratio(restoreMs, catalogueMs),
    buildOverInstall: ratio(median(builds), installMs),
    rounds: { builds: BUILDS, restores: restores.length, installs: INSTALL_ROUNDS },
  };
}

/** Runs the images benchmark. */
export async function run() {
  const packages = (process.env['READIE_BENCH_IMAGE_PACKAGES'] ?? 'tomli-w==1.2.0:tomli_w')
    .split(',')
    .map((entry) => entry.split(':') as [string, string]);
  const harness = await startHarness({
    catalogue: CATALOGUE,
    flags: { standby: '0', restoreBackend: 'auto' },
  });
  try {
    const results = [];
    for (const [requirement, module] of packages) {
      results.push(await measure(harness, requirement, module));
    }
    return {
      note: 'median ms per call, end to end at the worker; install = packages= fetched and installed per call (today); restore = a later call of an image (from its snapshot where snapshotBytes is set); catalogue = the same checkpoint restored with nothing installed',
      restoreBackend: harness.worker.backend?.description,
      results,
    };
  } finally {
    await harness.stop();
  }
}
