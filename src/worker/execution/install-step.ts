/**
 * Step 5 of a call: installing its packages. The worker fetches wheels on the host side into the
 * container's downloads directory (the container has no network of its own to an index), then
 * the executor installs them offline inside the sandbox, as the container's user; both relay
 * their output.
 */
import { LogSource } from '../../proto/gen/readie/v1/call.js';
import { ExecutorLostError, PackageInstallError } from '../core/errors.js';
import {
  decodeLogBody,
  encodeJsonFrame,
  FrameType,
  frameTypeName,
  InstallDoneSchema,
  readFrameBody,
  type ExecutorConnection,
  type InstallDone,
} from '../executor-link/index.js';
import {
  clearFetched,
  fetchCommand,
  FetchFailedError,
  installCommand,
  runFetch,
  shareFetched,
  type InstallCommand,
  type Installer,
  type PackageSource,
} from '../packages/index.js';
import { PACKAGE_PREFIX, SANDBOX_DOWNLOADS_DIR, SANDBOX_WHEEL_DIR } from '../sandbox/index.js';

/** What an install needs. */
export interface InstallStep {
  readonly connection: ExecutorConnection;
  readonly packages: readonly string[];
  readonly installer: Installer;
  /** The interpreter the executor runs (and the host-side fetch runs, for the same wheels). */
  readonly python: string;
  readonly source: PackageSource;
  /** The container's downloads directory on the host (bound at SANDBOX_DOWNLOADS_DIR). */
  readonly downloads: string;
  /** pip's cache for host-side fetches, in the worker's state directory. */
  readonly cacheDir: string;
  /** Sends one line to the client as a SYSTEM log line. */
  readonly say: (text: string) => Promise<void>;
  readonly signal: AbortSignal;
}

/**
 * Installs `packages` into the container's prefix; throws PackageInstallError (the call ends with
 * FAILED_PRECONDITION, the container unchanged) when the fetch or the installer fails.
 */
export async function installPackages(step: InstallStep): Promise<void> {
  const { packages } = step;
  const fetch = fetchCommand(step.python, step.source, step.downloads, step.cacheDir, packages);
  const findLinks = [
    ...(fetch ? [SANDBOX_DOWNLOADS_DIR] : []),
    ...(step.source.wheelDir ? [SANDBOX_WHEEL_DIR] : []),
  ];
  const install = installCommand(step.installer, step.python, findLinks, PACKAGE_PREFIX, packages);
  try {
    if (fetch) {
      await step.say(`fetching ${packages.join(' ')} (wheels only) on the worker`);
      try {
        await runFetch(fetch, step.say, step.signal);
      } catch (error) {
        step.signal.throwIfAborted();
        if (!(error instanceof FetchFailedError)) throw error;
        throw new PackageInstallError(
          `installing ${packages.join(', ')} failed: ${error.message} (its output came as log lines; only wheels are fetched, never sources); the container is unchanged`,
        );
      }
      await shareFetched(step.downloads);
    }
    await step.say(`installing ${packages.join(' ')} with ${step.installer.kind}`);
    await installInside(step, install);
  } finally {
    if (fetch) await clearFetched(step.downloads);
  }
}

async function installInside(
  step: InstallStep,
  command: ReturnType<typeof installCommand>,
): Promise<void> {
  const done = await runInstallFrame(
    step.connection,
    command,
    PACKAGE_PREFIX,
    step.say,
    step.signal,
  );
  if (done.ok) return;
  throw new PackageInstallError(
    `installing ${step.packages.join(', ')} failed: ${done.message} (the installer's output came as log lines); the container is unchanged`,
  );
}

/**
 * Sends INSTALL (the installer's `command`, into `prefix`) and relays the executor's LOG lines to
 * `say` until its INSTALL_DONE, which it returns.
 */
export async function runInstallFrame(
  connection: ExecutorConnection,
  command: InstallCommand,
  prefix: string,
  say: (text: string) => Promise<void>,
  signal: AbortSignal,
): Promise<InstallDone> {
  await connection.write(
    encodeJsonFrame(FrameType.INSTALL, { argv: command.argv, env: command.env, prefix }),
  );
  for (;;) {
    signal.throwIfAborted();
    const frame = await connection.next();
    if (frame === null) {
      throw new ExecutorLostError('the executor closed the connection during the install');
    }
    if (frame.type === FrameType.LOG) {
      await say(decodeLogBody(frame).text);
      continue;
    }
    if (frame.type !== FrameType.INSTALL_DONE) {
      throw new ExecutorLostError(
        `the executor sent ${frameTypeName(frame.type)} during the install`,
      );
    }
    return readFrameBody(frame, InstallDoneSchema);
  }
}

/** The log source of installer output. */
export const INSTALL_LOG_SOURCE = LogSource.LOG_SOURCE_SYSTEM;
