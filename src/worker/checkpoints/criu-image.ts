/**
 * A checkpoint's CRIU image on disk: sealed after the dump (every file hashed, made read-only, a
 * manifest written last), reopened after a restart only if it was built for this machine (CRIU
 * version, CPU, kernel, Python, modules, setup, the same module sources) and its files still hash
 * as sealed, and checked before each restore for any change since.
 */
import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';
import { chmod, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import { join } from 'node:path';
import { EXECUTOR_DIR } from '../sandbox/index.js';

/** The name of the manifest in an image directory; an image without one is incomplete. */
export const MANIFEST = 'image.json';
const FORMAT = 1;

/** What an image was built for: any difference makes it stale. */
export interface ImageIdentity {
  readonly criuVersion: string;
  /** vendor, family/model and model name of the CPU. */
  readonly cpuModel: string;
  /** SHA-256 of the CPU's feature flags. */
  readonly cpuFlags: string;
  readonly kernel: string;
  /** The Python binary (real path) with its size and modification time. */
  readonly python: string;
  readonly executorDir: string;
  readonly modules: readonly string[];
  /** SHA-256 of the setup source ('' for none). */
  readonly setup: string;
}

/** A sealed image's manifest. */
export interface ImageManifest {
  readonly format: number;
  readonly checkpointId: string;
  readonly identity: ImageIdentity;
  readonly files: readonly {
    readonly name: string;
    readonly size: number;
    readonly sha256: string;
  }[];
  /** [path, size, mtime in ns] of every module file the dumped process had loaded. */
  readonly sources: readonly (readonly [string, number, string])[];
  readonly bytes: number;
  readonly dumpMs: number;
  readonly importMs: number;
  readonly createdAt: string;
}

/** The parts of the identity that come from the machine, read once per backend. */
export async function machineIdentity(
  criuVersion: string,
  python: string,
): Promise<Omit<ImageIdentity, 'modules' | 'setup'>> {
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const first = cpuinfo.split('\n\n')[0] ?? '';
  const field = (name: string) =>
    new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(first)?.[1]?.trim() ?? '';
  const flags = field('flags').split(/\s+/).filter(Boolean).sort().join(' ');
  const binary = await realpath(python).catch(() => python);
  const info = await stat(binary).catch(() => null);
  return {
    criuVersion,
    cpuModel: `${field('vendor_id')} ${field('cpu family')}/${field('model')} ${field('model name')}`,
    cpuFlags: sha256(flags),
    kernel: release(),
    python: `${binary} ${info?.size ?? 0} ${info?.mtimeMs ?? 0}`,
    executorDir: EXECUTOR_DIR,
  };
}

/** SHA-256 of a string, hex. */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const IDENTITY_WORDS: Record<keyof ImageIdentity, string> = {
  criuVersion: 'another CRIU version',
  cpuModel: 'another CPU model',
  cpuFlags: 'a CPU with other features',
  kernel: 'another kernel',
  python: 'another Python binary',
  executorDir: 'another executor directory',
  modules: 'other modules',
  setup: 'another setup',
};

/** Why an image built for `built` cannot serve `wanted`, or null when it can. Pure. */
export function identityMismatch(built: ImageIdentity, wanted: ImageIdentity): string | null {
  for (const key of Object.keys(IDENTITY_WORDS) as (keyof ImageIdentity)[]) {
    const a = JSON.stringify(built[key] ?? null);
    const b = JSON.stringify(wanted[key]);
    if (a !== b) return `it was built for ${IDENTITY_WORDS[key]} (${a}, here ${b})`;
  }
  return null;
}

interface FileStamp {
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
}

async function stamp(path: string): Promise<FileStamp> {
  const info = await stat(path);
  return { size: info.size, mtimeMs: info.mtimeMs, ctimeMs: info.ctimeMs, ino: info.ino };
}

/** An image that can be restored from. */
export class CriuImage {
  private constructor(
    readonly dir: string,
    readonly manifest: ImageManifest,
    private readonly stamps: ReadonlyMap<string, FileStamp>,
  ) {}

  /**
   * Seals the dump in `dir`: hashes every file, makes them and the directory read-only, writes
   * the manifest last (the module sources come from the seed's seed.json); returns the manifest.
   */
  static async seal(
    dir: string,
    checkpointId: string,
    identity: ImageIdentity,
    timings: { readonly dumpMs: number; readonly importMs: number },
    createdAt: string,
  ): Promise<ImageManifest> {
    const names = (await readdir(dir)).filter((name) => name !== MANIFEST).sort();
    const files = [];
    let bytes = 0;
    for (const name of names) {
      const path = join(dir, name);
      await chmod(path, 0o400);
      const info = await stat(path);
      if (!info.isFile()) throw new Error(`the dump left ${name}, which is not a file`);
      files.push({ name, size: info.size, sha256: await hashFile(path) });
      bytes += info.size;
    }
    const seed = JSON.parse(await readFile(join(dir, 'seed.json'), 'utf8')) as {
      sources?: [string, number, string][];
    };
    const manifest: ImageManifest = {
      format: FORMAT,
      checkpointId,
      identity,
      files,
      sources: seed.sources ?? [],
      bytes,
      ...timings,
      createdAt,
    };
    const temporary = join(dir, `${MANIFEST}.tmp`);
    await writeFile(temporary, `${JSON.stringify(manifest)}\n`, { mode: 0o400 });
    await rename(temporary, join(dir, MANIFEST));
    await chmod(dir, 0o500);
    return manifest;
  }

  /**
   * Reopens a sealed image for `identity`: the image, or why it cannot be used (missing,
   * incomplete, built for something else, a module source changed, a file changed).
   */
  static async open(
    dir: string,
    identity: ImageIdentity,
  ): Promise<CriuImage | { readonly stale: string; readonly missing: boolean }> {
    let manifest: ImageManifest;
    try {
      manifest = JSON.parse(await readFile(join(dir, MANIFEST), 'utf8')) as ImageManifest;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        return { stale: 'there is no image yet', missing: true };
      }
      return { stale: `its manifest is unreadable (${(error as Error).message})`, missing: false };
    }
    const stale = await CriuImage.whyStale(dir, manifest, identity);
    return stale === null ? CriuImage.stamped(dir, manifest) : { stale, missing: false };
  }

  private static async whyStale(
    dir: string,
    manifest: ImageManifest,
    identity: ImageIdentity,
  ): Promise<string | null> {
    if (manifest.format !== FORMAT) return `its manifest is of format ${manifest.format}`;
    const mismatch = identityMismatch(manifest.identity, identity);
    if (mismatch) return mismatch;
    for (const [path, size, mtimeNs] of manifest.sources) {
      const info = await stat(path, { bigint: true }).catch(() => null);
      if (!info || Number(info.size) !== size || String(info.mtimeNs) !== mtimeNs) {
        return `the module file ${path} changed since the dump`;
      }
    }
    const names = (await readdir(dir)).filter((name) => name !== MANIFEST).sort();
    const sealed = manifest.files.map((file) => file.name);
    if (JSON.stringify(names) !== JSON.stringify(sealed)) {
      return `its files are not the ones sealed (${names.join(', ')})`;
    }
    for (const file of manifest.files) {
      const path = join(dir, file.name);
      const info = await stat(path);
      if (info.size !== file.size || (await hashFile(path)) !== file.sha256) {
        return `its file ${file.name} is corrupt (it does not hash as sealed)`;
      }
    }
    return null;
  }

  /** The image sealed with `manifest`, now at `dir`, as its files are now. */
  static async stamped(dir: string, manifest: ImageManifest): Promise<CriuImage> {
    const stamps = new Map<string, FileStamp>();
    for (const file of manifest.files) stamps.set(file.name, await stamp(join(dir, file.name)));
    return new CriuImage(dir, manifest, stamps);
  }

  /** Bytes of memory pages in the image (what a restore copies in). */
  get pagesBytes(): number {
    return this.manifest.files
      .filter((file) => file.name.startsWith('pages-'))
      .reduce((sum, file) => sum + file.size, 0);
  }

  /**
   * What changed in the image's files since it was sealed or opened, or null. Runs before every
   * restore: synchronous stat calls of the image's few files (cached inodes, some microseconds
   * each) cost a tenth of the CPU the same calls cost through the thread pool, one promise each.
   */
  changed(): string | null {
    for (const [name, before] of this.stamps) {
      let now;
      try {
        now = statSync(join(this.dir, name), { throwIfNoEntry: false });
      } catch (error) {
        return `${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`;
      }
      if (now === undefined) return `${name} is gone`;
      if (now.size !== before.size) {
        return `${name} changed size (${before.size} -> ${now.size} bytes)`;
      }
      if (
        now.mtimeMs !== before.mtimeMs ||
        now.ctimeMs !== before.ctimeMs ||
        now.ino !== before.ino
      ) {
        return `${name} was modified`;
      }
    }
    return null;
  }
}

/**
 * Puts the image built in `building` at `dir`, replacing what was there; the old one is removed.
 * Restores already running from the old image keep their open files.
 */
export async function replaceImage(building: string, dir: string): Promise<void> {
  const old = `${dir}+old-${process.pid}-${Date.now()}`;
  await rename(dir, old).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
  await rename(building, dir);
  await rm(old, { recursive: true, force: true });
}

/**
 * The directory name of a checkpoint's image: readable, safe as a path, unique per ID, and never
 * with a '+' (which marks an unfinished dump or a replaced image).
 */
export function imageDirName(checkpointId: string): string {
  const readable = checkpointId
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, 48);
  return `${readable}-${sha256(checkpointId).slice(0, 12)}`;
}
