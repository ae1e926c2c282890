/**
 * A worker's report of every image it holds (docs/images.md), sent after each status report, as
 * events: the router's holdings for that worker are made to agree with the worker's disk.
 * `ImageBuilt` (`buildMs` 0) for each listed image the router did not have it hold (or held with
 * another size or other declaration keys), and, when the list is complete, `ImageRemoved`
 * (reason `absent`) for each it had it hold that the list leaves out: images found at a
 * restarted worker's start come back, images deleted while it was down or lost by the router go.
 * A worker is not trusted: its report is bounded and its entries checked (`heldImagesProblem`)
 * before anything is decided. Pure.
 */
import type { Cause } from '../../events/cause.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { imageSlot } from '../../projections/image-holdings.js';
import { liveWorkerOf } from '../consequences/index.js';
import {
  MAX_HELD_IMAGE_DECLARATIONS,
  MAX_HELD_IMAGES,
  MAX_IMAGE_DECLARATIONS,
} from '../../shared/held-image-bounds.js';
import { tenantIdProblem } from '../tenant-id.js';
import type { ImageReportDecision } from './image-report.js';

/** An image's identity, and a declaration's key: 64 lowercase hex digits. */
const IMAGE_HASH = /^[0-9a-f]{64}$/;

/** One image a worker holds. */
export interface HeldImageEntry {
  /** Null: calls without a tenant. */
  readonly tenantId: string | null;
  readonly imageId: string;
  readonly bytes: number;
  /** The keys of the tenant's declarations that resolved to it. */
  readonly declarations: readonly string[];
}

/** Every image a worker holds. */
export interface HeldImagesReport {
  readonly workerId: string;
  readonly images: readonly HeldImageEntry[];
  /** True when `images` is every image the worker holds (only then are others forgotten). */
  readonly complete: boolean;
}

/** Why a tenant ID a worker names cannot be an image's, or null. */
export function imageTenantProblem(tenantId: string | null): string | null {
  return tenantId === null ? null : tenantIdProblem(tenantId, 'tenant');
}

/**
 * What is wrong with a report, or null: over the bounds, an identity or a key that is not 64
 * lowercase hex digits, a tenant ID no tenant could have (too long, control characters), a size
 * that is not a whole number of bytes, an image listed twice.
 */
export function heldImagesProblem(report: HeldImagesReport): string | null {
  if (report.images.length > MAX_HELD_IMAGES) {
    return `a report lists at most ${MAX_HELD_IMAGES} images, not ${report.images.length}`;
  }
  const seen = new Set<string>();
  let keys = 0;
  for (const [index, image] of report.images.entries()) {
    const tenant = imageTenantProblem(image.tenantId);
    if (tenant !== null) return `images[${index}].tenant_id: ${tenant}`;
    if (!IMAGE_HASH.test(image.imageId)) {
      return `images[${index}].image_id must be 64 lowercase hex digits`;
    }
    if (!Number.isSafeInteger(image.bytes) || image.bytes < 0) {
      return `images[${index}].bytes must be a whole number of bytes`;
    }
    if (image.declarations.length > MAX_IMAGE_DECLARATIONS) {
      return `images[${index}].declarations has at most ${MAX_IMAGE_DECLARATIONS} keys`;
    }
    if (!image.declarations.every((key) => IMAGE_HASH.test(key))) {
      return `each of images[${index}].declarations must be 64 lowercase hex digits`;
    }
    keys += image.declarations.length;
    if (keys > MAX_HELD_IMAGE_DECLARATIONS) {
      return `a report carries at most ${MAX_HELD_IMAGE_DECLARATIONS} declaration keys in all`;
    }
    const slot = imageSlot(image.tenantId, image.imageId);
    if (seen.has(slot)) return `images lists image ${image.imageId} of one tenant twice`;
    seen.add(slot);
  }
  return null;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((key, i) => key === b[i]);
}

function bySlot(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The events of a report of held images (`report:WORKER`), in the order of the images' tenant and
 * identity, removals first. A report from a worker the router does not know records nothing.
 * The report must have passed `heldImagesProblem`.
 */
export function decideHeldImagesReport(
  state: ClusterState,
  report: HeldImagesReport,
): ImageReportDecision {
  const cause: Cause = { kind: 'report', workerId: report.workerId };
  if (!liveWorkerOf(state, report.workerId)) return { cause, registered: false, events: [] };
  const { workerId } = report;
  const held = state.images.get(workerId);
  const listed = new Map(
    report.images.map((image) => [imageSlot(image.tenantId, image.imageId), image] as const),
  );
  const events: NewEvent[] = [];
  if (report.complete && held !== undefined) {
    const gone = [...held].filter(([slot]) => !listed.has(slot));
    for (const [, image] of gone.sort(([a], [b]) => bySlot(a, b))) {
      events.push({
        type: 'ImageRemoved',
        workerId,
        tenantId: image.tenantId,
        imageId: image.imageId,
        reason: 'absent',
      });
    }
  }
  for (const [slot, image] of [...listed].sort(([a], [b]) => bySlot(a, b))) {
    const declarations = [...new Set(image.declarations)].sort(bySlot);
    const before = held?.get(slot);
    if (before?.bytes === image.bytes && sameKeys(before.declarations, declarations)) continue;
    events.push({
      type: 'ImageBuilt',
      workerId,
      tenantId: image.tenantId,
      imageId: image.imageId,
      bytes: image.bytes,
      buildMs: 0,
      declarations: declarations.length === 0 ? null : declarations,
    });
  }
  return { cause, registered: true, events };
}
