/**
 * The CRIU restore backend: each checkpoint is an executor seed dumped once with `criu dump` into
 * an image directory under the worker's state directory; each container is a `criu restore` of
 * it into a fresh pid namespace, after which the restored process enters its sandbox exactly as a
 * template's fork does. Images are files: they outlive the worker, a restarted worker reuses the
 * ones built for this machine, and they are the checkpoint's on-disk (`cached`) tier. Used only
 * when the probe (probeCriu in backend-selection.ts) restored a real container end to end.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  runZygote,
  type ContainerProcess,
  type ContainerSpec,
  type ZygoteLaunch,
} from '../sandbox/index.js';
import { CriuLauncher } from './criu-launcher.js';
import {
  CriuImage,
  imageDirName,
  machineIdentity,
  replaceImage,
  sha256,
  type ImageIdentity,
} from './criu-image.js';
import { CriuImageSnapshots } from './criu-snapshots.js';
import { RestoreError, type CheckpointBuild, type RestoreBackend } from './restore-backend.js';

/** How the CRIU backend runs. */
export interface CriuBackendOptions {
  readonly criu: string;
  /** e.g. "4.2.1" */
  readonly version: string;
  readonly python: string;
  /** Where checkpoint images live (one directory per checkpoint). */
  readonly imagesDir: string;
  readonly log: Logger;
  /** How long a seed may take to import, run its setup and be dumped. */
  readonly buildTimeoutMs: number;
  /** First delay before a discarded image is dumped again; doubles on each failure, up to 5 min. */
  readonly rebuildDelayMs: number;
  /** Reuse valid images an earlier run left in `imagesDir` (the probe's backend does not). */
  readonly reuse: boolean;
  /**
   * Images with at least this many bytes of memory pages restore lazily (`criu lazy-pages`: the
   * container starts at once and its memory is copied in on demand and in the background); null
   * where the kernel cannot (no non-cooperative userfaultfd).
   */
  readonly lazyPagesFrom: number | null;
}

/** The default size from which images restore lazily: below it, copying the pages is quicker. */
export const LAZY_PAGES_FROM = 64 * 1024 * 1024;

/** Restores in a row that fail before an image is discarded and dumped again. */
const FAILURES_BEFORE_REDUMP = 3;
const MAX_REBUILD_DELAY_MS = 300_000;

/** Restores containers from CRIU images. */
export class CriuBackend implements RestoreBackend {
  readonly description: string;
  readonly imageSnapshots: CriuImageSnapshots;
  /** Dumps this backend made (an image reused from an earlier run is not one). */
  dumps = 0;
  private readonly images = new Map<string, CriuImage>();
  private readonly checkpoints = new Map<string, CheckpointBuild>();
  private readonly failures = new Map<string, number>();
  private readonly listeners: (() => void)[] = [];
  private readonly rebuildTimers = new Set<NodeJS.Timeout>();
  private machine: ReturnType<typeof machineIdentity> | null = null;
  private leftovers: Promise<void> | null = null;
  private readonly launcher: CriuLauncher;
  private closed = false;

  constructor(private readonly options: CriuBackendOptions) {
    this.description = `criu ${options.version}`;
    this.launcher = new CriuLauncher(this.launch, options.criu, options.buildTimeoutMs);
    this.imageSnapshots = new CriuImageSnapshots({
      criu: options.criu,
      python: options.python,
      log: options.log,
      buildTimeoutMs: options.buildTimeoutMs,
      launcher: this.launcher,
      machine: () => (this.machine ??= machineIdentity(this.options.version, this.options.python)),
    });
  }

  private get launch(): ZygoteLaunch {
    return { python: this.options.python, log: this.options.log };
  }

  async build(checkpoint: CheckpointBuild): Promise<void> {
    this.checkpoints.set(checkpoint.id, checkpoint);
    await (this.leftovers ??= this.removeLeftovers());
    const identity = await this.identityOf(checkpoint);
    const dir = join(this.options.imagesDir, imageDirName(checkpoint.id));
    if (this.options.reuse) {
      const opened = await CriuImage.open(dir, identity);
      if (opened instanceof CriuImage) {
        this.options.log.info(
          { checkpointId: checkpoint.id, images: dir, imageBytes: opened.manifest.bytes },
          'checkpoint image reused',
        );
        this.adopt(checkpoint.id, opened);
        return;
      }
      if (!opened.missing) {
        this.options.log.warn(
          { checkpointId: checkpoint.id, images: dir, reason: opened.stale },
          'checkpoint image not reusable: dumping it again',
        );
      }
    }
    await this.dump(checkpoint, identity, dir);
  }

  /** Dumps a seed of `checkpoint` beside `dir`, seals it, and puts it in place of `dir`. */
  private async dump(checkpoint: CheckpointBuild, identity: ImageIdentity, dir: string) {
    await mkdir(this.options.imagesDir, { recursive: true, mode: 0o700 });
    // '+' never occurs in an image directory's name: a leftover is never taken for an image.
    const building = `${dir}+building-${randomUUID().slice(0, 8)}`;
    await mkdir(building, { mode: 0o700 });
    try {
      const setupArgs: string[] = [];
      if (checkpoint.setup) {
        const setupFile = join(building, 'setup.py');
        await writeFile(setupFile, checkpoint.setup, { mode: 0o400 });
        setupArgs.push('--setup', setupFile);
      }
      const { code, events } = await runZygote(
        this.launch,
        [
          '--checkpoint',
          checkpoint.id,
          '--modules',
          checkpoint.modules.join(','),
          ...setupArgs,
          '--criu',
          this.options.criu,
          '--criu-seed',
          building,
        ],
        this.options.buildTimeoutMs,
      );
      const ready = events.find((event) => event.event === 'ready');
      if (code !== 0 || !ready) {
        const failed = events.find((event) => event.event === 'failed');
        throw new Error(
          failed?.error ??
            `the CRIU seed did not finish within ${this.options.buildTimeoutMs} ms (exit ${code})`,
        );
      }
      const timings = { dumpMs: ready.dumpMs ?? 0, importMs: ready.importMs };
      const manifest = await CriuImage.seal(
        building,
        checkpoint.id,
        identity,
        timings,
        new Date().toISOString(),
      );
      await replaceImage(building, dir);
      const image = await CriuImage.stamped(dir, manifest);
      this.dumps += 1;
      this.options.log.info(
        { checkpointId: checkpoint.id, images: dir, imageBytes: manifest.bytes, ...timings },
        'checkpoint dumped with criu',
      );
      this.adopt(checkpoint.id, image);
    } catch (error) {
      await rm(building, { recursive: true, force: true });
      throw error;
    }
  }

  private adopt(checkpointId: string, image: CriuImage): void {
    if (this.closed) return;
    this.images.set(checkpointId, image);
    this.failures.delete(checkpointId);
    // Started now, so that the first restore does not wait for it.
    this.launcher
      .warm()
      .catch((error: Error) =>
        this.options.log.warn({ err: error.message }, 'the CRIU launcher did not start'),
      );
    this.notify();
  }

  /** Unfinished dumps and replaced images a crash left behind. */
  private async removeLeftovers(): Promise<void> {
    const entries = await readdir(this.options.imagesDir).catch(() => []);
    for (const entry of entries) {
      if (entry.includes('+')) {
        await rm(join(this.options.imagesDir, entry), { recursive: true, force: true });
      }
    }
  }

  private async identityOf(checkpoint: CheckpointBuild): Promise<ImageIdentity> {
    return {
      ...(await (this.machine ??= machineIdentity(this.options.version, this.options.python))),
      modules: [...checkpoint.modules],
      setup: checkpoint.setup ? sha256(checkpoint.setup) : '',
    };
  }

  held(): string[] {
    return [...this.images.keys()].sort();
  }

  hasImage(checkpointId: string): boolean {
    return this.images.has(checkpointId);
  }

  isResident(): boolean {
    // Nothing of a checkpoint stays in memory here: its standbys are the pool's.
    return false;
  }

  residentBytes(): Promise<number> {
    return Promise.resolve(0);
  }

  async dropResident(): Promise<void> {
    // Nothing to free: the image stays, and restores come from it.
  }

  async restore(checkpointId: string, spec: ContainerSpec): Promise<ContainerProcess> {
    const image = this.images.get(checkpointId);
    if (!image) throw new RestoreError(`checkpoint ${checkpointId} is not held by this worker`);
    const changed = image.changed();
    if (changed !== null) {
      this.discard(checkpointId, image, `its image changed after the dump: ${changed}`);
      throw new RestoreError(
        `checkpoint ${checkpointId}'s CRIU image is corrupt (${changed}); it is being dumped again`,
      );
    }
    try {
      const { lazyPagesFrom } = this.options;
      const started = await this.launcher.restore(spec, {
        checkpoint: checkpointId,
        criuImages: image.dir,
        criuLazy: lazyPagesFrom !== null && image.pagesBytes >= lazyPagesFrom,
      });
      this.failures.delete(checkpointId);
      return started;
    } catch (error) {
      const failures = (this.failures.get(checkpointId) ?? 0) + 1;
      this.failures.set(checkpointId, failures);
      if (failures >= FAILURES_BEFORE_REDUMP) {
        this.discard(checkpointId, image, `${failures} restores in a row failed`);
      }
      throw new RestoreError(`criu restore of ${checkpointId} failed: ${(error as Error).message}`);
    }
  }

  /** Stops restoring from `image` (calls naming it start cold) and dumps it again later. */
  private discard(checkpointId: string, image: CriuImage, reason: string): void {
    if (this.images.get(checkpointId) !== image) return;
    this.images.delete(checkpointId);
    this.failures.delete(checkpointId);
    this.options.log.error(
      { checkpointId, images: image.dir, reason },
      'checkpoint image discarded: calls naming it start cold until it is dumped again',
    );
    this.notify();
    this.scheduleRebuild(checkpointId, this.options.rebuildDelayMs);
  }

  private scheduleRebuild(checkpointId: string, delayMs: number): void {
    const checkpoint = this.checkpoints.get(checkpointId);
    if (!checkpoint || this.closed) return;
    const timer = setTimeout(() => {
      this.rebuildTimers.delete(timer);
      if (this.closed) return;
      const dir = join(this.options.imagesDir, imageDirName(checkpointId));
      this.identityOf(checkpoint)
        .then((identity) => this.dump(checkpoint, identity, dir))
        .catch((error: Error) => {
          this.options.log.warn(
            { checkpointId, err: error.message },
            'dumping a checkpoint again failed; retrying later',
          );
          this.scheduleRebuild(checkpointId, Math.min(delayMs * 2, MAX_REBUILD_DELAY_MS));
        });
    }, delayMs);
    timer.unref();
    this.rebuildTimers.add(timer);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.rebuildTimers) clearTimeout(timer);
    this.rebuildTimers.clear();
    await this.launcher.close();
    this.images.clear();
  }
}
