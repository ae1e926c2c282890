/**
 * What a tenant's call may carry in its config (docs/router.md, "What a call's config may
 * carry"): identifiers of a closed character set and a bounded length, and import hints and
 * package entries bounded in count and length. The router checks them before anything is
 * logged, so a refused config costs the log nothing, and no tenant text that reaches the log, a
 * status page or a replay screen holds a control character. Each refusal is `INVALID_ARGUMENT`
 * naming the field and the bound; it never repeats the value (it may be kilobytes, or escapes).
 */
import type { ImageSpec } from '../../proto/gen/readie/v1/call.js';
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import { InvalidStreamError } from '../errors.js';
import { checkImageEnv } from './image-fields.js';

/** The longest request, session, retry or checkpoint ID the router accepts. */
export const MAX_ID_LENGTH = 256;
/** The characters an ID may hold, in words (for messages and docs). */
export const ID_CHARACTERS = 'ASCII letters, digits and . _ - : @ + =';
const ID_CHARACTER = /^[A-Za-z0-9._:@+=-]$/;

/** The most import hints one call may carry. */
export const MAX_IMPORT_HINTS = 64;
/** The longest import hint (a module name). */
export const MAX_IMPORT_HINT_LENGTH = 128;
/** An import hint: a Python module name of ASCII identifiers, dotted. */
const IMPORT_HINT = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/** The most package entries one call may carry. */
export const MAX_PACKAGES = 64;
/** The longest package entry (a PEP 508 requirement). */
export const MAX_PACKAGE_LENGTH = 256;
/** A package entry holds printable ASCII only (PEP 508 needs no more). */
const PACKAGE_CHARACTER = /^[\x20-\x7e]$/;

/** The longest Python version a call may name (`3.11.2`, `3.13.0rc1`). */
export const MAX_PYTHON_VERSION_LENGTH = 32;
const PYTHON_VERSION = /^[0-9A-Za-z.+-]*$/;

/** The most inputs one batch call may carry (`inputs`). */
export const MAX_BATCH_INPUTS = 1024;
/** The most inputs of a batch its container may run at once (`max_inputs`). */
export const MAX_INPUTS_AT_ONCE = 256;
/** The longest function name a call may carry (`module.qualname`). */
export const MAX_FUNCTION_LENGTH = 256;
/** A function name holds no control, format or separator character (it is shown to people). */
const FUNCTION_CHARACTER = /^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]$/u;

/** `U+000A` for a character: how a refusal names one without printing it. */
function codePoint(character: string): string {
  return `U+${(character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The first character of `text` that `allowed` refuses, with its position (from 1), or null. */
function firstRefused(text: string, allowed: RegExp): { character: string; at: number } | null {
  let at = 0;
  for (const character of text) {
    at += 1;
    if (!allowed.test(character)) return { character, at };
  }
  return null;
}

/**
 * Checks a tenant-supplied identifier (`field` names it as the wire does: `request_id`); an empty
 * one is left to the caller (some are optional). Throws `InvalidStreamError` otherwise.
 */
export function checkId(field: string, id: string): void {
  if (id.length > MAX_ID_LENGTH) {
    throw new InvalidStreamError(
      `${field} is ${id.length} characters long: an ID has at most ${MAX_ID_LENGTH}`,
    );
  }
  const refused = firstRefused(id, ID_CHARACTER);
  if (refused !== null) {
    throw new InvalidStreamError(
      `${field} holds ${codePoint(refused.character)} at character ${refused.at}: an ID holds only ${ID_CHARACTERS} (at most ${MAX_ID_LENGTH})`,
    );
  }
}

function checkImports(imports: readonly string[], field = 'imports'): void {
  if (imports.length > MAX_IMPORT_HINTS) {
    throw new InvalidStreamError(
      `${field} carries ${imports.length} import hints: a call carries at most ${MAX_IMPORT_HINTS}`,
    );
  }
  imports.forEach((hint, index) => {
    if (hint.length > MAX_IMPORT_HINT_LENGTH) {
      throw new InvalidStreamError(
        `${field}[${index}] is ${hint.length} characters long: an import hint has at most ${MAX_IMPORT_HINT_LENGTH}`,
      );
    }
    if (!IMPORT_HINT.test(hint)) {
      throw new InvalidStreamError(
        `${field}[${index}] is not a module name: an import hint is ASCII letters, digits and _, dotted (numpy, torch.nn)`,
      );
    }
  });
}

function checkPackages(packages: readonly string[], field = 'packages'): void {
  if (packages.length > MAX_PACKAGES) {
    throw new InvalidStreamError(
      `${field} carries ${packages.length} entries: a call carries at most ${MAX_PACKAGES}`,
    );
  }
  packages.forEach((entry, index) => {
    if (entry.length > MAX_PACKAGE_LENGTH) {
      throw new InvalidStreamError(
        `${field}[${index}] is ${entry.length} characters long: a package entry has at most ${MAX_PACKAGE_LENGTH}`,
      );
    }
    const refused = firstRefused(entry, PACKAGE_CHARACTER);
    if (refused !== null) {
      throw new InvalidStreamError(
        `${field}[${index}] holds ${codePoint(refused.character)} at character ${refused.at}: a package entry holds printable ASCII only`,
      );
    }
  });
}

function checkFunction(name: string): void {
  if (name.length > MAX_FUNCTION_LENGTH) {
    throw new InvalidStreamError(
      `function is ${name.length} characters long: a function name has at most ${MAX_FUNCTION_LENGTH}`,
    );
  }
  const refused = firstRefused(name, FUNCTION_CHARACTER);
  if (refused !== null) {
    throw new InvalidStreamError(
      `function holds ${codePoint(refused.character)} at character ${refused.at}: a function name holds no control or format character`,
    );
  }
}

function checkPythonVersion(version: string): void {
  if (version.length > MAX_PYTHON_VERSION_LENGTH || !PYTHON_VERSION.test(version)) {
    throw new InvalidStreamError(
      `python_version is not a version: at most ${MAX_PYTHON_VERSION_LENGTH} characters of digits, letters and . + - (3.11.2)`,
    );
  }
}

function checkBatch(inputs: number, maxInputs: number): void {
  if (inputs > MAX_BATCH_INPUTS) {
    throw new InvalidStreamError(
      `inputs is ${inputs}: a batch carries at most ${MAX_BATCH_INPUTS} inputs`,
    );
  }
  if (maxInputs > MAX_INPUTS_AT_ONCE) {
    throw new InvalidStreamError(
      `max_inputs is ${maxInputs}: a container runs at most ${MAX_INPUTS_AT_ONCE} inputs at once`,
    );
  }
}

/** Checks every tenant-supplied field of a call's config against its bound (see the file's doc). */
export function checkCallFields(config: CallConfig): void {
  checkId('request_id', config.requestId);
  checkId('session_id', config.sessionId);
  checkId('retry_of', config.retryOf);
  checkId('checkpoint_id', config.checkpointId);
  checkImports(config.imports);
  checkPackages(config.packages);
  checkPythonVersion(config.pythonVersion);
  checkBatch(config.inputs ?? 0, config.maxInputs ?? 0);
  checkFunction(config.function);
  if (config.image) checkImageSpec(config.image);
}

/** Checks an image declaration against the bounds of a call's (a call's image, or a listing's). */
export function checkImageSpec(image: ImageSpec): void {
  checkImports(image.imports, 'image.imports');
  checkPackages(image.packages, 'image.packages');
  checkImageEnv(image.env);
}
