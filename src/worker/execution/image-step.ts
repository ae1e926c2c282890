/**
 * Entering a call's image in its container (docs/images.md): the executor puts the image's prefix
 * first on `sys.path`, sets its environment and imports its modules, inside the sandbox.
 */
import { ExecutorLostError } from '../core/errors.js';
import {
  encodeJsonFrame,
  FrameType,
  frameTypeName,
  ImageDoneSchema,
  readFrameBody,
  type ExecutorConnection,
  type ImageDone,
} from '../executor-link/index.js';
import { SANDBOX_IMAGE_PREFIX } from '../sandbox/index.js';

/** What the executor needs to enter an image. */
export interface ImageEntry {
  readonly imports: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** Sends IMAGE and returns the executor's IMAGE_DONE (a failed import names its module). */
export async function enterImage(
  connection: ExecutorConnection,
  entry: ImageEntry,
  signal: AbortSignal,
): Promise<ImageDone> {
  await connection.write(
    encodeJsonFrame(FrameType.IMAGE, {
      prefix: SANDBOX_IMAGE_PREFIX,
      imports: entry.imports,
      env: entry.env,
    }),
  );
  signal.throwIfAborted();
  const frame = await connection.next();
  if (frame === null) {
    throw new ExecutorLostError('the executor closed the connection while entering the image');
  }
  if (frame.type !== FrameType.IMAGE_DONE) {
    throw new ExecutorLostError(
      `the executor sent ${frameTypeName(frame.type)} while entering the image`,
    );
  }
  return readFrameBody(frame, ImageDoneSchema);
}
