/**
 * The images each worker holds as the router knows them (docs/images.md), folded from
 * `ImageBuilt` and `ImageRemoved`: per worker, per tenant and identity, the image's size and the
 * keys of the tenant's declarations that resolved to it (`CallRequested.imageKey`). Placement
 * rules v8 read it to prefer a worker that holds a call's image. A worker's images outlive its
 * eviction (they stay on its disk and a restarted worker keeps them); an evicted worker is no
 * candidate anyway, and the report of every image it holds that follows each of its status
 * reports makes its record agree with its disk (`core/registry/held-images-report.ts`). Pure.
 */
import type { EventOf } from '../events/types.js';

/** One image a worker holds. */
export interface HeldImageRecord {
  readonly tenantId: string | null;
  readonly imageId: string;
  readonly bytes: number;
  /**
   * How long its build took on that worker, ms, as its `ImageBuilt` said; 0: not known (found on
   * disk by a held-images report with no build before it). Rules 10 read it as the image's build
   * cost.
   */
  readonly buildMs: number;
  /** The declaration keys that resolved to it on that worker (sorted). */
  readonly declarations: readonly string[];
}

/** Every worker's images: worker ID, then `tenant "\n" identity`, to the image. */
export type ImageHoldings = ReadonlyMap<string, ReadonlyMap<string, HeldImageRecord>>;

/** The holdings before any image event. */
export function initialImageHoldings(): ImageHoldings {
  return new Map();
}

/** An image's key among its worker's: `tenant "\n" identity` (the fold's and a snapshot's). */
export function imageSlot(tenantId: string | null, imageId: string): string {
  return `${tenantId ?? ''}\n${imageId}`;
}

/**
 * Which workers hold an image of each declaration key: key, then worker ID, to how many of that
 * worker's images the key resolved to. Derived from the holdings (kept in step by
 * `applyImageEvent`, rebuilt from them by `imageKeyIndexOf`): placement looks a call's key up here
 * instead of walking every worker's images.
 */
export type ImageKeyIndex = ReadonlyMap<string, ReadonlyMap<string, number>>;

/** The index of `holdings` (a snapshot's restore). */
export function imageKeyIndexOf(holdings: ImageHoldings): Map<string, Map<string, number>> {
  const index = new Map<string, Map<string, number>>();
  for (const [workerId, images] of holdings) {
    for (const image of images.values()) countKeys(index, workerId, image.declarations, 1);
  }
  return index;
}

function countKeys(
  index: Map<string, Map<string, number>>,
  workerId: string,
  keys: readonly string[],
  by: 1 | -1,
): void {
  for (const key of keys) {
    let workers = index.get(key);
    if (!workers) index.set(key, (workers = new Map<string, number>()));
    const count = (workers.get(workerId) ?? 0) + by;
    if (count > 0) workers.set(workerId, count);
    else workers.delete(workerId);
    if (workers.size === 0) index.delete(key);
  }
}

/** Applies an image event to the holdings and their index (the fold's part; changed in place). */
export function applyImageEvent(
  holdings: Map<string, Map<string, HeldImageRecord>>,
  index: Map<string, Map<string, number>>,
  event: EventOf<'ImageBuilt'> | EventOf<'ImageRemoved'>,
): void {
  const key = imageSlot(event.tenantId, event.imageId);
  let images = holdings.get(event.workerId);
  const before = images?.get(key);
  if (before) countKeys(index, event.workerId, before.declarations, -1);
  if (event.type === 'ImageRemoved') {
    images?.delete(key);
    if (images?.size === 0) holdings.delete(event.workerId);
    return;
  }
  if (!images) holdings.set(event.workerId, (images = new Map<string, HeldImageRecord>()));
  const declarations = [...(event.declarations ?? [])].sort();
  images.set(key, {
    tenantId: event.tenantId,
    imageId: event.imageId,
    bytes: event.bytes,
    // A held-images report's `ImageBuilt` (buildMs 0: found on disk) keeps the build time the
    // router knew.
    buildMs: event.buildMs > 0 ? event.buildMs : (before?.buildMs ?? 0),
    declarations,
  });
  countKeys(index, event.workerId, declarations, 1);
}

/**
 * What building the image of `imageKey` costs, ms: the longest build any of its holders recorded
 * (`ImageBuilt.buildMs`); null when none recorded one above 0 (unknown).
 */
export function imageBuildCost(
  holdings: ImageHoldings,
  index: ImageKeyIndex,
  imageKey: string,
): number | null {
  let longest = 0;
  const workers = index.get(imageKey);
  if (!workers) return null;
  for (const workerId of workers.keys()) {
    const images = holdings.get(workerId);
    if (!images) continue;
    for (const image of images.values()) {
      if (image.buildMs > longest && image.declarations.includes(imageKey)) longest = image.buildMs;
    }
  }
  return longest > 0 ? longest : null;
}

/** The workers that hold the image of `imageKey`, by worker ID as text. */
export function imageHolders(index: ImageKeyIndex, imageKey: string): string[] {
  const workers = index.get(imageKey);
  if (!workers) return [];
  return [...workers.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
