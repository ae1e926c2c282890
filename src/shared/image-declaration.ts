/**
 * The key of a tenant's image declaration (docs/images.md): SHA-256 hex of the tenant, the
 * requirements (sorted), the imports (in order: they import in that order) and the environment
 * (sorted by name), as the client declared them. A worker looks its built images up by it, and
 * the router records it on a call (`CallRequested.imageKey`) so placement can prefer a worker
 * that holds the image; both compute it here, so they always agree. Pure: hashing only.
 */
import { createHash } from 'node:crypto';

/** An image as the client declares it. */
export interface ImageDeclaration {
  readonly packages: readonly string[];
  readonly imports: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** The environment's entries, sorted by name. */
export function sortedEnv(env: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The key of a tenant's declaration (`""`: calls without a tenant). */
export function declarationKey(tenantId: string, image: ImageDeclaration): string {
  return createHash('sha256')
    .update(
      JSON.stringify({
        tenant: tenantId,
        packages: [...image.packages].sort(),
        imports: image.imports,
        env: sortedEnv(image.env),
      }),
      'utf8',
    )
    .digest('hex');
}
