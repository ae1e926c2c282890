/**
 * Building one image (docs/images.md), in a build directory the store renames into place once it
 * is whole: resolve the requirements to wheels on the host (as installs are, wheels only), hash
 * them into the image's identity, install them into the image's prefix inside a fresh sandboxed
 * container (cold: no checkpoint's state, the usual limits, its own uid owning the prefix for the
 * build alone), import the listed modules there, then seal the prefix (root's, read-only).
 */
import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ContainerPool } from '../containers/index.js';
import { ImageBuildError } from '../core/errors.js';
import {
  firstErrorLine,
  imageFetchCommand,
  imageIdentity,
  type ImageDeclaration,
  type ResolvedWheel,
} from '../core/images/index.js';
import { enterImage } from '../execution/image-step.js';
import { runInstallFrame } from '../execution/install-step.js';
import {
  FetchFailedError,
  installCommand,
  runFetch,
  shareFetched,
  type Installer,
  type PackageSource,
} from '../packages/index.js';
import { SANDBOX_IMAGE_PREFIX, SANDBOX_IMAGE_WHEELS } from '../sandbox/index.js';
import { hashWheels, prefixOf, removeTree, sealTree } from './image-files.js';

/** What a build needs of the worker. */
export interface BuildContext {
  readonly pool: ContainerPool;
  readonly python: string;
  readonly pythonVersion: string;
  readonly flavor: string;
  readonly installer: Installer;
  readonly source: PackageSource;
  /** pip's cache for host-side fetches. */
  readonly cacheDir: string;
  /** The build container's memory limit. */
  readonly memory: number;
}

/** What a finished build leaves in its directory. */
export interface BuiltFiles {
  readonly id: string;
  readonly wheels: readonly ResolvedWheel[];
  readonly bytes: number;
}

/** Resolves the declaration's requirements into `<dir>/wheels`; returns them and the identity. */
export async function resolveImage(
  context: BuildContext,
  dir: string,
  image: ImageDeclaration,
  say: (line: string) => Promise<void>,
  signal: AbortSignal,
): Promise<{ id: string; wheels: ResolvedWheel[] }> {
  const wheelsDir = join(dir, 'wheels');
  await mkdir(wheelsDir, { mode: 0o755 });
  // The worker's umask may be stricter (its state files are root's): the container must read it.
  await chmod(wheelsDir, 0o755);
  if (image.packages.length > 0) {
    const command = imageFetchCommand(
      context.python,
      context.source,
      wheelsDir,
      context.cacheDir,
      image.packages,
    );
    const lines: string[] = [];
    await say(`image: resolving ${image.packages.join(' ')} to wheels on the worker`);
    try {
      await runFetch(
        command,
        (line) => {
          lines.push(line);
          return say(line);
        },
        signal,
      );
    } catch (error) {
      signal.throwIfAborted();
      if (!(error instanceof FetchFailedError)) throw error;
      throw new ImageBuildError(
        `image requirements ${image.packages.join(', ')} did not resolve to wheels (only wheels are used, never sources): ${firstErrorLine(lines) ?? error.message}`,
      );
    }
    await shareFetched(wheelsDir);
  }
  const wheels = await hashWheels(wheelsDir);
  return { id: imageIdentity(wheels, image, context.pythonVersion, context.flavor), wheels };
}

/**
 * Installs the resolved wheels into `<dir>/prefix` in a fresh sandboxed container, imports the
 * image's modules there, and seals the prefix; returns its size. The build container is destroyed
 * (and its uid released) before the prefix is sealed.
 */
export async function installImage(
  context: BuildContext,
  dir: string,
  image: ImageDeclaration,
  say: (line: string) => Promise<void>,
  signal: AbortSignal,
): Promise<number> {
  const prefix = prefixOf(dir);
  await mkdir(prefix, { mode: 0o755 });
  await chmod(prefix, 0o755);
  const created = await context.pool.create(context.memory, '', signal, '', false, {
    prefix,
    wheels: join(dir, 'wheels'),
    writable: true,
  });
  try {
    if (image.packages.length > 0) {
      const lines: string[] = [];
      const command = installCommand(
        context.installer,
        context.python,
        [SANDBOX_IMAGE_WHEELS],
        SANDBOX_IMAGE_PREFIX,
        image.packages,
        { compileBytecode: true },
      );
      await say(`image: installing ${image.packages.join(' ')} in a sandboxed build container`);
      const done = await runInstallFrame(
        created.connection,
        command,
        SANDBOX_IMAGE_PREFIX,
        (line) => {
          lines.push(line);
          return say(line);
        },
        signal,
      );
      if (!done.ok) {
        throw new ImageBuildError(
          `installing the image's requirements ${image.packages.join(', ')} failed: ${firstErrorLine(lines) ?? done.message}`,
        );
      }
    }
    const entered = await enterImage(created.connection, image, signal);
    if (!entered.ok) {
      throw new ImageBuildError(`the image does not import: ${entered.message}`.slice(0, 8192));
    }
  } finally {
    created.connection.destroy();
    await context.pool.destroy(created.container);
  }
  await removeTree(join(dir, 'wheels'));
  return sealTree(prefix);
}
