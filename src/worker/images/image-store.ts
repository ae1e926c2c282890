/**
 * The images a worker holds (docs/images.md), per tenant: looking a call's image up by its
 * declaration, building it once (concurrent calls wait for that one build, each bounded by its
 * own deadline), keeping the cache within `--image-cache-size` (least recently used first, never
 * an image in use), listing and removing them. A tenant's images are its own: a lookup never
 * crosses tenants, even for the same identity (a build runs code).
 */
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ImageOutcome, type ReportImageRequest } from '../../proto/gen/readie/v1/registry.js';
import {
  ImageBuildError,
  ImageInUseError,
  ImageNameError,
  ImageNotFoundError,
  ImageTooLargeError,
} from '../core/errors.js';
import {
  declarationKey,
  imageName,
  majorMinor,
  planImageRoom,
  tenantTag,
  type ImageDeclaration,
} from '../core/images/index.js';
import type { HeldSnapshot, SnapshotStart } from '../containers/index.js';
import { abortable } from '../execution/call-support.js';
import { installImage, resolveImage, type BuildContext } from './image-build.js';
import {
  prefixOf,
  readManifest,
  removeTree,
  writeManifest,
  type ImageManifest,
} from './image-files.js';

/** What the store reports (the worker relays it to the router). */
export type ImageEvent =
  | {
      readonly type: 'built';
      readonly tenantId: string;
      readonly imageId: string;
      readonly bytes: number;
      readonly buildMs: number;
      /** The declaration keys that resolved to it. */
      readonly declarations: readonly string[];
    }
  | { readonly type: 'build-failed'; readonly tenantId: string; readonly error: string }
  | {
      readonly type: 'removed';
      readonly tenantId: string;
      readonly imageId: string;
      readonly reason: 'evicted' | 'removed';
    };

/** One image on this worker. */
export interface HeldImage {
  readonly manifest: ImageManifest;
  readonly dir: string;
  lastUsedMs: number;
  inUse: number;
  /** Its memory snapshot (`<dir>/snapshot`), where the worker made one. */
  snapshot: HeldSnapshot | null;
}

/** Bytes an image takes on disk: its prefix, and its snapshot. */
export function imageBytes(image: HeldImage): number {
  return image.manifest.bytes + (image.snapshot?.snapshot.bytes ?? 0);
}

/**
 * A new directory for an image's snapshot: named apart from every other dump, so that a dump
 * still running for an image removed meanwhile never meets the next build's.
 */
function newSnapshotDir(imageDir: string): string {
  return join(imageDir, `snapshot-${randomUUID().slice(0, 8)}`);
}

/** How the store runs. */
export interface ImageStoreOptions extends BuildContext {
  /** `<state-dir>/images`. */
  readonly dir: string;
  /** Bytes the images may take on disk (`--image-cache-size`); 0 for no bound. */
  readonly capacity: number;
  /** How long one build may take before it is abandoned. */
  readonly buildTimeoutMs: number;
  readonly log: Logger;
  readonly clock: () => number;
  readonly onEvent: (event: ImageEvent) => void;
}

/** An image a call holds until it ends (never evicted meanwhile). */
export interface ImageUse {
  readonly image: HeldImage;
  /** True when this call waited for (or ran) the image's build. */
  readonly built: boolean;
  release(): void;
}

/** The worker's images. */
export class ImageStore {
  /** By tenant tag, then identity. */
  private readonly images = new Map<string, Map<string, HeldImage>>();
  /** Declaration key -> the image it resolved to. */
  private readonly declared = new Map<string, HeldImage>();
  private readonly builds = new Map<string, Promise<HeldImage>>();
  /** Snapshots dumped again after a start (one at a time, behind the calls). */
  private redumps: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly options: ImageStoreOptions) {}

  /**
   * Reads the images an earlier run left (a directory whose manifest names it, for this Python
   * and flavor), and removes everything else: leftovers of killed builds, stale images.
   */
  async load(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    for (const tag of await readdir(this.options.dir)) {
      const tenantDir = join(this.options.dir, tag);
      for (const name of await readdir(tenantDir).catch(() => [] as string[])) {
        const dir = join(tenantDir, name);
        const manifest = name.startsWith('+') ? null : await readManifest(dir);
        const usable =
          manifest !== null &&
          manifest.id === name &&
          tenantTag(manifest.tenantId) === tag &&
          manifest.python === majorMinor(this.options.pythonVersion) &&
          manifest.flavor === this.options.flavor;
        if (!usable) {
          this.options.log.info({ dir }, 'removing an incomplete or stale image');
          await removeTree(dir);
          continue;
        }
        const held: HeldImage = {
          manifest,
          dir,
          lastUsedMs: this.options.clock(),
          inUse: 0,
          snapshot: null,
        };
        held.snapshot = await this.reopenSnapshot(held);
        this.adopt(held);
        if (!held.snapshot && this.options.pool.imageSnapshots.makesImageSnapshots) {
          this.redumpLater(held);
        }
      }
    }
  }

  /**
   * The snapshot an earlier run left with `image`, or null (a stale one is removed; `load` has
   * one dumped again). A worker that makes no snapshots leaves them on disk for a later run.
   */
  private async reopenSnapshot(image: HeldImage): Promise<HeldSnapshot | null> {
    if (!this.options.pool.imageSnapshots.makesImageSnapshots) return null;
    const names = (await readdir(image.dir)).filter((name) => name.startsWith('snapshot-')).sort();
    let kept: HeldSnapshot | null = null;
    for (const name of names) {
      const dir = join(image.dir, name);
      const reopened: HeldSnapshot | { readonly stale: string } = kept
        ? { stale: 'the image has another snapshot' }
        : await this.options.pool.imageSnapshots.reopenImageSnapshot(dir, seedOf(image.manifest));
      if ('stale' in reopened) {
        this.options.log.info(
          { dir, reason: reopened.stale },
          "removing an image's stale snapshot",
        );
        await removeTree(dir);
      } else kept = reopened;
    }
    return kept;
  }

  /**
   * Dumps `image`'s memory snapshot (where the worker makes them); a failed dump leaves the image
   * without one (its containers enter it) and says why.
   */
  private async snapshot(
    image: HeldImage,
    say: (line: string) => Promise<void>,
  ): Promise<HeldSnapshot | null> {
    const dir = newSnapshotDir(image.dir);
    try {
      const made = await this.options.pool.imageSnapshots.dumpImageSnapshot(
        dir,
        prefixOf(image.dir),
        seedOf(image.manifest),
        this.options.memory,
      );
      if (made) {
        const { bytes, importMs, dumpMs } = made.snapshot;
        await say(
          `image: snapshotted after its imports (${bytes} bytes; imports ${Math.round(importMs)} ms, dump ${Math.round(dumpMs)} ms)`,
        );
      }
      return made;
    } catch (error) {
      await removeTree(dir).catch(() => undefined);
      const reason = (error as Error).message;
      this.options.log.warn(
        { image: imageName(image.manifest.id), err: reason },
        'image snapshot failed: its containers import its modules',
      );
      await say(`image: no snapshot (${reason.slice(0, 500)}): each container imports its modules`);
      return null;
    }
  }

  /** How a container of `image` starts from its snapshot, or null when it has none. */
  snapshotStart(image: HeldImage): SnapshotStart | null {
    const held = image.snapshot;
    return held ? { ...held, imageId: image.manifest.id } : null;
  }

  private redumpLater(image: HeldImage): void {
    const quiet = () => Promise.resolve();
    this.redumps = this.redumps.then(async () => {
      if (this.closed || !this.isHeld(image) || image.snapshot) return;
      const made = await this.snapshot(image, quiet);
      if (made && this.isHeld(image) && !this.closed) image.snapshot = made;
      else await made?.identity.retire();
    });
  }

  private isHeld(image: HeldImage): boolean {
    return this.images.get(tenantTag(image.manifest.tenantId))?.get(image.manifest.id) === image;
  }

  private adopt(image: HeldImage): void {
    const tag = tenantTag(image.manifest.tenantId);
    let tenant = this.images.get(tag);
    if (!tenant) this.images.set(tag, (tenant = new Map<string, HeldImage>()));
    tenant.set(image.manifest.id, image);
    for (const key of image.manifest.declarations) this.declared.set(key, image);
  }

  /** Every image held, for listings. */
  list(): HeldImage[] {
    return [...this.images.values()].flatMap((tenant) => [...tenant.values()]);
  }

  /** Bytes the images take on disk. */
  get bytes(): number {
    return this.list().reduce((sum, image) => sum + imageBytes(image), 0);
  }

  /**
   * The call's image for `tenantId`, built now if this worker has none (or waiting for the build
   * already running); the call holds it until `release`. `say` hears the build's output.
   */
  async obtain(
    tenantId: string,
    image: ImageDeclaration,
    signal: AbortSignal,
    say: (line: string) => Promise<void>,
  ): Promise<ImageUse> {
    const key = declarationKey(tenantId, image);
    let built = false;
    let held = this.declared.get(key);
    if (!held) {
      built = true;
      let build = this.builds.get(key);
      if (build) await say('image: waiting for its build on this worker');
      else {
        build = this.build(tenantId, image, key, say).finally(() => this.builds.delete(key));
        this.builds.set(key, build);
      }
      held = await abortable(build, signal);
    }
    const use = held;
    use.inUse += 1;
    use.lastUsedMs = this.options.clock();
    let released = false;
    return {
      image: use,
      built,
      release: () => {
        if (released) return;
        released = true;
        use.inUse -= 1;
        use.lastUsedMs = this.options.clock();
      },
    };
  }

  private async build(
    tenantId: string,
    image: ImageDeclaration,
    key: string,
    say: (line: string) => Promise<void>,
  ): Promise<HeldImage> {
    const started = performance.now();
    // The first caller hears the build; it may leave meanwhile, the build goes on for the others.
    const tell = (line: string) => say(line).catch(() => undefined);
    const signal = AbortSignal.timeout(this.options.buildTimeoutMs);
    const tenantDir = join(this.options.dir, tenantTag(tenantId));
    await mkdir(tenantDir, { recursive: true, mode: 0o700 });
    // '+' never starts an identity: a leftover is never taken for an image.
    const dir = join(tenantDir, `+building-${randomUUID().slice(0, 8)}`);
    await mkdir(dir, { mode: 0o700 });
    try {
      const { id, wheels } = await resolveImage(this.options, dir, image, tell, signal);
      const existing = this.images.get(tenantTag(tenantId))?.get(id);
      if (existing) {
        // Another declaration of the same image: it is one image.
        await removeTree(dir);
        await this.declare(existing, key);
        return existing;
      }
      const bytes = await installImage(this.options, dir, image, tell, signal);
      this.makeRoom(bytes);
      const buildMs = Math.round(performance.now() - started);
      const manifest: ImageManifest = {
        format: 1,
        id,
        tenantId,
        declarations: [key],
        packages: [...image.packages],
        imports: [...image.imports],
        env: { ...image.env },
        wheels,
        bytes,
        buildMs,
        builtAt: new Date(this.options.clock()).toISOString(),
        python: majorMinor(this.options.pythonVersion),
        flavor: this.options.flavor,
      };
      await writeManifest(dir, manifest);
      const final = join(tenantDir, id);
      await removeTree(final);
      await rename(dir, final);
      const held: HeldImage = {
        manifest,
        dir: final,
        lastUsedMs: this.options.clock(),
        inUse: 0,
        snapshot: null,
      };
      held.snapshot = await this.snapshot(held, tell);
      if (this.closed) {
        // The worker stopped while this image was dumped: its uid goes back now.
        await held.snapshot?.identity.retire();
        held.snapshot = null;
      }
      this.adopt(held);
      const total = imageBytes(held);
      this.options.log.info(
        { tenant: tenantTag(tenantId), image: imageName(id), bytes: total, buildMs },
        'image built',
      );
      this.options.onEvent({
        type: 'built',
        tenantId,
        imageId: id,
        bytes: total,
        buildMs,
        declarations: manifest.declarations,
      });
      await tell(`image: built ${imageName(id)} (${total} bytes) in ${buildMs} ms`);
      return held;
    } catch (error) {
      await removeTree(dir).catch(() => undefined);
      const failure =
        error instanceof ImageBuildError || error instanceof ImageTooLargeError
          ? error
          : signal.aborted
            ? new ImageBuildError(
                `the image's build took longer than ${this.options.buildTimeoutMs} ms and was abandoned`,
              )
            : new ImageBuildError(`the image's build failed: ${(error as Error).message}`);
      this.options.log.warn(
        { tenant: tenantTag(tenantId), err: failure.message },
        'image build failed',
      );
      this.options.onEvent({ type: 'build-failed', tenantId, error: failure.message });
      throw failure;
    }
  }

  private async declare(image: HeldImage, key: string): Promise<void> {
    if (image.manifest.declarations.includes(key)) return;
    const manifest = { ...image.manifest, declarations: [...image.manifest.declarations, key] };
    // The manifest is rewritten beside the image and renamed over the old one.
    const next = join(image.dir, 'manifest.json+next');
    await rm(next, { force: true });
    await writeFile(next, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o444 });
    await chmod(next, 0o444);
    await rename(next, join(image.dir, 'manifest.json'));
    Object.assign(image, { manifest });
    this.declared.set(key, image);
    // The router learns the new key as it learnt the first: placement prefers this worker for it.
    this.options.onEvent({
      type: 'built',
      tenantId: manifest.tenantId,
      imageId: manifest.id,
      bytes: imageBytes(image),
      buildMs: 0,
      declarations: manifest.declarations,
    });
  }

  /** Evicts least recently used idle images so `bytes` more fit; refuses an image too large. */
  private makeRoom(bytes: number): void {
    const held = this.list();
    const plan = planImageRoom(
      held.map((image) => ({
        key: image.dir,
        bytes: imageBytes(image),
        lastUsedMs: image.lastUsedMs,
        inUse: image.inUse,
      })),
      bytes,
      this.options.capacity,
    );
    if (!plan.fits) throw new ImageTooLargeError(plan.reason);
    for (const dir of plan.evict) {
      const image = held.find((candidate) => candidate.dir === dir);
      if (image) void this.drop(image, 'evicted');
    }
  }

  private async drop(image: HeldImage, reason: 'evicted' | 'removed'): Promise<void> {
    const { id, tenantId } = image.manifest;
    this.images.get(tenantTag(tenantId))?.delete(id);
    for (const key of image.manifest.declarations) {
      if (this.declared.get(key) === image) this.declared.delete(key);
    }
    await removeTree(image.dir);
    // Its uid goes back once no container restored from its snapshot runs.
    await image.snapshot?.identity.retire();
    this.options.log.info(
      { tenant: tenantTag(tenantId), image: imageName(id), reason },
      'image removed',
    );
    this.options.onEvent({ type: 'removed', tenantId, imageId: id, reason });
  }

  /**
   * Stops dumping snapshots and gives their uids back (the worker is stopping and its containers
   * are gone); the images stay on disk, and a restarted worker reopens them.
   */
  async close(): Promise<void> {
    this.closed = true;
    // A dump still running gives its uid back when it ends (redumpLater, build).
    for (const image of this.list()) await image.snapshot?.identity.retire();
  }

  /** The cache size in bytes (`--image-cache-size`); 0 for no bound. */
  get capacity(): number {
    return this.options.capacity;
  }

  /**
   * The images held for `tenantId` (null: every tenant's); with `image`, only the one that
   * declaration of that tenant resolved to on this worker (none before its first build).
   */
  held(tenantId: string | null, image: ImageDeclaration | null = null): HeldImage[] {
    if (image !== null) {
      if (tenantId === null) return [];
      const found = this.declared.get(declarationKey(tenantId, image));
      return found && found.manifest.tenantId === tenantId ? [found] : [];
    }
    return this.list().filter((held) => tenantId === null || held.manifest.tenantId === tenantId);
  }

  /**
   * Removes the image named `name` (its identity, or `image:` and a prefix of at least 8 hex
   * digits) of `tenantId` (null: any tenant's), and returns it. Refused while a call uses it, and
   * when the prefix names several images (of the tenants asked about).
   */
  async remove(tenantId: string | null, name: string): Promise<HeldImage[]> {
    const prefix = name.startsWith('image:') ? name.slice('image:'.length) : name;
    if (!/^[0-9a-f]{8,64}$/.test(prefix)) {
      throw new ImageNameError(
        'an image is named by its identity (64 hex digits) or image: and at least 8 of them',
      );
    }
    const matches = this.held(tenantId).filter((image) => image.manifest.id.startsWith(prefix));
    if (matches.length === 0) {
      throw new ImageNotFoundError(`this worker holds no image ${name} of that tenant`);
    }
    if (new Set(matches.map((image) => image.manifest.id)).size > 1) {
      throw new ImageNameError(
        `${name} names ${matches.length} images on this worker: give more of its identity`,
      );
    }
    const busy = matches.find((image) => image.inUse > 0);
    if (busy) {
      throw new ImageInUseError(
        `image ${imageName(busy.manifest.id)} is in use by ${busy.inUse} call(s): try again when they end`,
      );
    }
    for (const image of matches) await this.drop(image, 'removed');
    return matches;
  }

  /** The prefix to bind into a container of `image`. */
  prefixOf(image: HeldImage): string {
    return prefixOf(image.dir);
  }
}

/** What an image's seed enters. */
function seedOf(manifest: ImageManifest) {
  return { name: imageName(manifest.id), imports: manifest.imports, env: manifest.env };
}

/** An image event as the router hears it (RegistryService.ReportImage). */
export function imageReportOf(workerId: string, event: ImageEvent): ReportImageRequest {
  const base = {
    workerId,
    tenantId: event.tenantId,
    bytes: 0,
    buildMs: 0,
    error: '',
    imageId: '',
    declarations: [] as string[],
  };
  switch (event.type) {
    case 'built':
      return {
        ...base,
        outcome: ImageOutcome.IMAGE_OUTCOME_BUILT,
        imageId: event.imageId,
        bytes: event.bytes,
        buildMs: event.buildMs,
        declarations: [...event.declarations],
      };
    case 'build-failed':
      return { ...base, outcome: ImageOutcome.IMAGE_OUTCOME_BUILD_FAILED, error: event.error };
    case 'removed':
      return {
        ...base,
        outcome:
          event.reason === 'evicted'
            ? ImageOutcome.IMAGE_OUTCOME_EVICTED
            : ImageOutcome.IMAGE_OUTCOME_REMOVED,
        imageId: event.imageId,
      };
  }
}
