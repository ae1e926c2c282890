/** Step 5 of a call: installing its packages through the executor, relaying the output. */
import { LogSource } from '../../proto/gen/readie/v1/call.js';
import { ExecutorLostError, PackageInstallError } from '../errors.js';
import {
  decodeLogBody,
  encodeJsonFrame,
  FrameType,
  frameTypeName,
  InstallDoneSchema,
  readFrameBody,
  type ExecutorConnection,
} from '../executor-link/index.js';
import { installCommand, type Installer, type PackageSource } from '../packages/index.js';
import { PACKAGE_PREFIX } from '../sandbox/index.js';

/** What an install needs. */
export interface InstallStep {
  readonly connection: ExecutorConnection;
  readonly packages: readonly string[];
  readonly installer: Installer;
  /** The interpreter the executor runs. */
  readonly python: string;
  readonly source: PackageSource;
  /** Sends one line to the client as a SYSTEM log line. */
  readonly say: (text: string) => Promise<void>;
  readonly signal: AbortSignal;
}

/**
 * Installs `packages` into the container's prefix; throws PackageInstallError (the call ends with
 * FAILED_PRECONDITION, the container unchanged) when the installer fails.
 */
export async function installPackages(step: InstallStep): Promise<void> {
  const { connection, packages } = step;
  const command = installCommand(
    step.installer,
    step.python,
    step.source,
    PACKAGE_PREFIX,
    packages,
  );
  await step.say(`installing ${packages.join(' ')} with ${step.installer.kind}`);
  await connection.write(
    encodeJsonFrame(FrameType.INSTALL, {
      argv: command.argv,
      env: command.env,
      prefix: PACKAGE_PREFIX,
    }),
  );
  for (;;) {
    step.signal.throwIfAborted();
    const frame = await connection.next();
    if (frame === null) {
      throw new ExecutorLostError('the executor closed the connection during the install');
    }
    if (frame.type === FrameType.LOG) {
      await step.say(decodeLogBody(frame).text);
      continue;
    }
    if (frame.type !== FrameType.INSTALL_DONE) {
      throw new ExecutorLostError(
        `the executor sent ${frameTypeName(frame.type)} during the install`,
      );
    }
    const done = readFrameBody(frame, InstallDoneSchema);
    if (done.ok) return;
    throw new PackageInstallError(
      `installing ${packages.join(', ')} failed: ${done.message} (the installer's output came as log lines); the container is unchanged`,
    );
  }
}

/** The log source of installer output. */
export const INSTALL_LOG_SOURCE = LogSource.LOG_SOURCE_SYSTEM;
