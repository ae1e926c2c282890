/**
 * What an image listing or removal may name, checked before any worker is asked (pure): a tenant
 * ID (`""` is the tenant of calls without one), an image (its identity, or `image:` and at least
 * 8 hex digits of it), a worker ID. Each refusal is `INVALID_ARGUMENT` naming the field, never
 * repeating a tenant's text.
 */
import { tenantIdProblem } from '../../core/tenant-id.js';
import { ImageRequestError } from './image-errors.js';

/** An image as an operator may name it: its identity or `image:` and a prefix of it. */
const IMAGE_NAME = /^(image:)?[0-9a-f]{8,64}$/;
/** The longest worker ID a request may name. */
const MAX_WORKER_ID_LENGTH = 256;

/** The tenant a request names, checked (undefined: none named). */
export function checkedTenant(tenantId: string | undefined): string | undefined {
  // "" names the calls without a tenant here, which a pin or quota table may not.
  if (tenantId === undefined || tenantId === '') return tenantId;
  const problem = tenantIdProblem(tenantId, 'image request');
  if (problem !== null) throw new ImageRequestError(problem);
  return tenantId;
}

/** The image a removal names, checked (upper-case hex is read as lower). */
export function checkedImageName(name: string): string {
  const lower = name.trim().toLowerCase();
  if (!IMAGE_NAME.test(lower)) {
    throw new ImageRequestError(
      'name an image by its identity (64 hex digits) or as readie images shows it (image: and at least 8 hex digits)',
    );
  }
  return lower;
}

/** The worker a removal names, checked ("" : every worker). */
export function checkedWorkerId(workerId: string): string {
  if (workerId.length > MAX_WORKER_ID_LENGTH || /\p{Cc}/u.test(workerId)) {
    throw new ImageRequestError(
      `a worker ID has at most ${MAX_WORKER_ID_LENGTH} characters and no control characters`,
    );
  }
  return workerId;
}
