/**
 * Real workers against a real router, for the tests of the router's view of its workers: a worker
 * started in this process (real containers, cgroups, the template backend, plaintext, no
 * credentials) reporting to the router at an address, and a client of that router.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ReadieClient } from '../../src/client/index.js';
import type { Catalogue } from '../../src/events/catalogue.js';
import {
  resolveWorkerOptions,
  Worker,
  type WorkerFlagValues,
  type WorkerTuning,
} from '../../src/worker/index.js';
import { testLogger, testWorkerId } from './worker-harness.js';
import { PYTHON } from './python.js';
import { tempDir } from './temp.js';

/** One checkpoint with nothing imported: every container forks from a resident template. */
export const PLAIN_CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [{ id: 'checkpoint_0', modules: [], restoreCost: 60 }],
    },
  },
  importCosts: {},
  defaultImportCost: 100,
};

/** A real worker started for a test. */
export interface RealWorker {
  readonly worker: Worker;
  readonly workerId: string;
  readonly stateDir: string;
  stop(): Promise<void>;
}

/** How to start one. */
export interface RealWorkerOptions {
  readonly id?: string;
  readonly flags?: Partial<WorkerFlagValues>;
  readonly env?: Readonly<Record<string, string>>;
  readonly tuning?: Partial<WorkerTuning>;
  readonly catalogue?: Catalogue;
}

/** Starts a worker reporting to the router at `router` (64 GiB offered, 8 containers). */
export async function startRealWorker(
  router: string,
  options: RealWorkerOptions = {},
): Promise<RealWorker> {
  const stateDir = tempDir('rv-');
  const workerId = options.id ?? testWorkerId();
  const catalogue = join(stateDir, 'catalogue.json');
  writeFileSync(catalogue, JSON.stringify(options.catalogue ?? PLAIN_CATALOGUE));
  const resolved = resolveWorkerOptions(
    {
      router,
      listen: '127.0.0.1:0',
      id: workerId,
      flavor: 'cpu',
      memory: '64GiB',
      stateDir: join(stateDir, 'state'),
      python: PYTHON,
      insecure: true,
      auth: 'none',
      restoreBackend: 'template',
      catalogue,
      ...options.flags,
    },
    options.env ?? {},
    { totalMemory: 64 * 1024 ** 3 },
  );
  const worker = await Worker.start(resolved, testLogger(), {
    registerRetryDelayMs: 50,
    checkpointRebuildDelayMs: 600_000,
    nvidiaSmi: null,
    ...options.tuning,
  });
  return { worker, workerId, stateDir, stop: () => worker.stop() };
}

/** A plaintext client of the router at `address`. */
export function plainClient(address: string): ReadieClient {
  return new ReadieClient({ address, insecure: true });
}

/** A call that sleeps `seconds` in its container and answers `'slept'`. */
export const SLEEP_SOURCE = 'import time\n\ndef nap(s):\n    time.sleep(s)\n    return "slept"\n';
