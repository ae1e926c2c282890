/**
 * What a call's image (docs/images.md) may carry: requirements and import hints under the same
 * bounds as a call's own, and environment variables bounded in count and length. Checked with the
 * rest of the config before anything is logged; each refusal is `INVALID_ARGUMENT` naming the
 * field and the bound, never repeating the value.
 */
import type { ImageSpec } from '../../proto/gen/readie/v1/call.js';
import { InvalidStreamError } from '../errors.js';

/** The most environment variables an image may set. */
export const MAX_IMAGE_ENV = 64;
/** The longest environment variable name an image may set. */
export const MAX_IMAGE_ENV_NAME = 128;
/** The longest environment variable value an image may set. */
export const MAX_IMAGE_ENV_VALUE = 4096;
/** An environment variable's name: an ASCII identifier. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A value holds printable ASCII only. */
const ENV_VALUE = /^[\x20-\x7e]*$/;
/** Names the sandbox sets itself: an image never replaces them. */
const RESERVED_ENV = /^(READIE_|PYTHONPATH$|PYTHONHOME$|HOME$|TMPDIR$|PATH$)/;

/** Checks an image's environment (its packages and imports go through the call's own checks). */
export function checkImageEnv(env: Readonly<Record<string, string>>): void {
  const names = Object.keys(env);
  if (names.length > MAX_IMAGE_ENV) {
    throw new InvalidStreamError(
      `image.env sets ${names.length} variables: an image sets at most ${MAX_IMAGE_ENV}`,
    );
  }
  for (const name of names) {
    if (name.length > MAX_IMAGE_ENV_NAME || !ENV_NAME.test(name)) {
      throw new InvalidStreamError(
        `image.env holds a name that is not an identifier of at most ${MAX_IMAGE_ENV_NAME} ASCII letters, digits and _`,
      );
    }
    if (RESERVED_ENV.test(name)) {
      throw new InvalidStreamError(
        `image.env may not set ${name}: PATH, HOME, TMPDIR, PYTHONPATH, PYTHONHOME and READIE_* belong to the sandbox`,
      );
    }
    const value = env[name] ?? '';
    if (value.length > MAX_IMAGE_ENV_VALUE || !ENV_VALUE.test(value)) {
      throw new InvalidStreamError(
        `image.env.${name} is not a value of at most ${MAX_IMAGE_ENV_VALUE} printable ASCII characters`,
      );
    }
  }
}

/** An image that declares nothing is no image. */
export function isEmptyImage(image: ImageSpec | undefined): boolean {
  return (
    image === undefined ||
    (image.packages.length === 0 &&
      image.imports.length === 0 &&
      Object.keys(image.env).length === 0)
  );
}
