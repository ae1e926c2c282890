/**
 * An image's files on the worker's disk (docs/images.md): `<images>/<tenant tag>/<identity>/`
 * holds `manifest.json` and `prefix/` (the installed packages, root's and read-only once sealed).
 * A build works in `<tenant tag>/+building-<random>` and is renamed into place only once it is
 * complete and sealed, so a directory named for an identity with a manifest that names it is a
 * whole image; anything else under the images directory is a leftover of a killed build and is
 * removed at start.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, lchown, lstat, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Type as T, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { ResolvedWheel } from '../core/images/index.js';

/** What an image directory says of itself. */
export const ImageManifestSchema = T.Object({
  format: T.Literal(1),
  id: T.String({ pattern: '^[0-9a-f]{64}$' }),
  tenantId: T.String(),
  declarations: T.Array(T.String({ pattern: '^[0-9a-f]{64}$' })),
  packages: T.Array(T.String()),
  imports: T.Array(T.String()),
  env: T.Record(T.String(), T.String()),
  wheels: T.Array(T.Object({ file: T.String(), sha256: T.String() })),
  bytes: T.Integer({ minimum: 0 }),
  buildMs: T.Number({ minimum: 0 }),
  builtAt: T.String(),
  python: T.String(),
  flavor: T.String(),
});

/** An image's manifest. */
export type ImageManifest = Static<typeof ImageManifestSchema>;

const MANIFEST_CHECK = TypeCompiler.Compile(ImageManifestSchema);

/** The prefix directory of an image directory. */
export function prefixOf(imageDir: string): string {
  return join(imageDir, 'prefix');
}

/** Reads an image directory's manifest; null when it is missing or not a manifest. */
export async function readManifest(imageDir: string): Promise<ImageManifest | null> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(join(imageDir, 'manifest.json'), 'utf8'));
  } catch {
    return null;
  }
  return MANIFEST_CHECK.Check(value) ? value : null;
}

/** Writes a manifest into a build directory (read-only for everyone, root's). */
export async function writeManifest(imageDir: string, manifest: ImageManifest): Promise<void> {
  await writeFile(join(imageDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`, {
    mode: 0o444,
  });
}

/** The wheels in `dir`, each with the SHA-256 of its bytes, sorted by file name. */
export async function hashWheels(dir: string): Promise<ResolvedWheel[]> {
  const files = (await readdir(dir)).filter((file) => file.endsWith('.whl')).sort();
  const wheels: ResolvedWheel[] = [];
  for (const file of files) {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(join(dir, file))) hash.update(chunk as Buffer);
    wheels.push({ file, sha256: hash.digest('hex') });
  }
  return wheels;
}

/**
 * Makes a built prefix root's and unwritable by anyone else (the build's uid goes back to the
 * range and may be another container's next), and returns its size in bytes.
 */
export async function sealTree(dir: string): Promise<number> {
  let bytes = 0;
  const walk = async (path: string): Promise<void> => {
    const info = await lstat(path);
    await lchown(path, 0, 0);
    if (info.isSymbolicLink()) return;
    // chown cleared any set-id bit; none may come back, and nothing stays group/other-writable.
    await chmod(path, info.mode & 0o755);
    if (info.isDirectory()) {
      for (const name of await readdir(path)) await walk(join(path, name));
    } else bytes += info.size;
  };
  await walk(dir);
  return bytes;
}

/** Removes a directory tree, ignoring one that is gone already. */
export async function removeTree(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
