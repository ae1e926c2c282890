/**
 * Image snapshots with CRIU (docs/images.md): the executor's image seed (image_seed.py) enters
 * the image inside a sandbox, as the image's own uid, and is dumped there; each container of the
 * image is a `criu restore` of it into that container's fresh sandbox (image_restore.py), through
 * the backend's resident launcher. A snapshot is sealed like a checkpoint's image (every file
 * hashed, read-only, a manifest last) and checked for changes before each restore.
 */
import { readFile, rm, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { runZygote, type ContainerProcess, type ContainerSpec } from '../sandbox/index.js';
import { SANDBOX_IMAGE_PREFIX } from '../sandbox/index.js';
import { CriuImage, type ImageIdentity } from './criu-image.js';
import type { CriuLauncher } from './criu-launcher.js';
import {
  RestoreError,
  type ImageSeed,
  type ImageSnapshot,
  type ImageSnapshots,
} from './restore-backend.js';

/** What the snapshots need of their backend. */
export interface CriuSnapshotsOptions {
  readonly criu: string;
  readonly python: string;
  readonly log: Logger;
  /** How long a seed may take to enter its image and be dumped. */
  readonly buildTimeoutMs: number;
  readonly launcher: CriuLauncher;
  /** The machine's part of an image's identity (CRIU, CPU, kernel, Python). */
  readonly machine: () => Promise<Omit<ImageIdentity, 'modules' | 'setup'>>;
}

/** Makes and restores image snapshots with CRIU. */
export class CriuImageSnapshots implements ImageSnapshots {
  private readonly images = new WeakMap<ImageSnapshot, CriuImage>();

  constructor(private readonly options: CriuSnapshotsOptions) {}

  private async identity(seed: ImageSeed): Promise<ImageIdentity> {
    return {
      ...(await this.options.machine()),
      modules: [...seed.imports],
      // The image's environment is part of what was dumped, as a setup is of a checkpoint.
      setup: JSON.stringify(seed.env),
    };
  }

  async dump(dir: string, spec: ContainerSpec, seed: ImageSeed): Promise<ImageSnapshot> {
    const { options } = this;
    await mkdir(dir, { mode: 0o700 });
    try {
      const image = { prefix: SANDBOX_IMAGE_PREFIX, imports: seed.imports, env: seed.env };
      const { code, events } = await runZygote(
        { python: options.python, log: options.log },
        [
          '--checkpoint',
          seed.name,
          '--image-seed',
          dir,
          '--spec',
          JSON.stringify(spec),
          '--image',
          JSON.stringify(image),
          '--criu',
          options.criu,
        ],
        options.buildTimeoutMs,
      );
      const ready = events.find((event) => event.event === 'ready');
      if (code !== 0 || !ready) {
        const failed = events.find((event) => event.event === 'failed');
        throw new Error(
          failed?.error ??
            `the image's seed did not finish within ${options.buildTimeoutMs} ms (exit ${code})`,
        );
      }
      const timings = { dumpMs: ready.dumpMs ?? 0, importMs: ready.importMs };
      const manifest = await CriuImage.seal(
        dir,
        seed.name,
        await this.identity(seed),
        timings,
        new Date().toISOString(),
      );
      return this.adopt(await CriuImage.stamped(dir, manifest));
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  async open(dir: string, seed: ImageSeed): Promise<ImageSnapshot | { readonly stale: string }> {
    const opened = await CriuImage.open(dir, await this.identity(seed));
    return opened instanceof CriuImage ? this.adopt(opened) : { stale: opened.stale };
  }

  private async adopt(image: CriuImage): Promise<ImageSnapshot> {
    const seeded = JSON.parse(await readFile(join(image.dir, 'seed.json'), 'utf8')) as {
      uid?: unknown;
    };
    if (typeof seeded.uid !== 'number' || !Number.isInteger(seeded.uid) || seeded.uid <= 0) {
      throw new Error(`the snapshot in ${image.dir} names no uid`);
    }
    const snapshot: ImageSnapshot = {
      dir: image.dir,
      bytes: image.manifest.bytes,
      uid: seeded.uid,
      dumpMs: image.manifest.dumpMs,
      importMs: image.manifest.importMs,
    };
    this.images.set(snapshot, image);
    return snapshot;
  }

  async restore(snapshot: ImageSnapshot, spec: ContainerSpec): Promise<ContainerProcess> {
    const image = this.images.get(snapshot);
    if (!image)
      throw new RestoreError(`the snapshot in ${snapshot.dir} was not made or opened here`);
    const changed = image.changed();
    if (changed !== null) {
      throw new RestoreError(`the image's snapshot changed after its dump (${changed})`);
    }
    if (spec.uid !== snapshot.uid) {
      throw new RestoreError(`the snapshot runs as uid ${snapshot.uid}, not ${spec.uid}`);
    }
    try {
      return await this.options.launcher.restore(spec, {
        checkpoint: image.manifest.checkpointId,
        criuImages: image.dir,
        criuLazy: false,
        imageSnapshot: true,
      });
    } catch (error) {
      throw new RestoreError(
        `criu restore of the image's snapshot failed: ${(error as Error).message}`,
      );
    }
  }
}
