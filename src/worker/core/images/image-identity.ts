/**
 * What names an image (docs/images.md). Two keys, both SHA-256 hex:
 * - its *declaration* (tenant, requirements, imports, environment as the client wrote them): what
 *   a worker looks an image up by when a call arrives, so a built image needs no resolution again;
 * - its *identity*, the content hash of what it is: the exact wheels its requirements resolved to
 *   (file names and their SHA-256), the imports, the environment, the Python version
 *   (major.minor) and the flavor. Two declarations that resolve alike share one image.
 * Neither holds the tenant's name in clear on disk: a tenant's images live under its tag.
 * Pure: hashing only.
 */
import { createHash } from 'node:crypto';
import {
  declarationKey,
  sortedEnv,
  type ImageDeclaration,
} from '../../../shared/image-declaration.js';

export { declarationKey, type ImageDeclaration };

/** A wheel an image's requirements resolved to. */
export interface ResolvedWheel {
  /** Its file name (name, version, tags). */
  readonly file: string;
  /** SHA-256 of its bytes, hex. */
  readonly sha256: string;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The directory name a tenant's images live under: never the tenant's own text. */
export function tenantTag(tenantId: string): string {
  return sha256(`readie-image-tenant\n${tenantId}`).slice(0, 32);
}

/** An image's identity: the content hash of its wheels, imports, environment, Python and flavor. */
export function imageIdentity(
  wheels: readonly ResolvedWheel[],
  image: ImageDeclaration,
  pythonVersion: string,
  flavor: string,
): string {
  const files = [...wheels]
    .sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
    .map((wheel) => [wheel.file, wheel.sha256]);
  return sha256(
    JSON.stringify({
      wheels: files,
      imports: image.imports,
      env: sortedEnv(image.env),
      python: majorMinor(pythonVersion),
      flavor,
    }),
  );
}

/** `3.11` of `3.11.2`. */
export function majorMinor(version: string): string {
  return version.split('.').slice(0, 2).join('.');
}

/** How an image is named in answers (`checkpoint_id`) and listings: `image:` and 16 hex digits. */
export function imageName(identity: string): string {
  return `image:${identity.slice(0, 16)}`;
}

/**
 * The line of an installer's output that says what went wrong: the first `ERROR:` line, else the
 * last non-empty line, else null.
 */
export function firstErrorLine(lines: readonly string[]): string | null {
  const error = lines.find((line) => line.startsWith('ERROR:'));
  if (error !== undefined) return error.trim();
  const last = [...lines].reverse().find((line) => line.trim() !== '');
  return last === undefined ? null : last.trim();
}
