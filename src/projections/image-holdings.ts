/**
 * The images each worker holds as the router knows them (docs/images.md), folded from
 * `ImageBuilt` and `ImageRemoved`: per worker, per tenant and identity, the image's size and the
 * keys of the tenant's declarations that resolved to it (`CallRequested.imageKey`). Placement
 * rules v8 read it to prefer a worker that holds a call's image. A worker's images outlive its
 * eviction (they stay on its disk and a restarted worker keeps them); an evicted worker is no
 * candidate anyway. Pure.
 */
import type { EventOf } from '../events/types.js';

/** One image a worker holds. */
export interface HeldImageRecord {
  readonly tenantId: string | null;
  readonly imageId: string;
  readonly bytes: number;
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

/** Applies an image event to the holdings (the fold's part for images; changed in place). */
export function applyImageEvent(
  holdings: Map<string, Map<string, HeldImageRecord>>,
  event: EventOf<'ImageBuilt'> | EventOf<'ImageRemoved'>,
): void {
  const key = imageSlot(event.tenantId, event.imageId);
  if (event.type === 'ImageRemoved') {
    const images = holdings.get(event.workerId);
    images?.delete(key);
    if (images?.size === 0) holdings.delete(event.workerId);
    return;
  }
  let images = holdings.get(event.workerId);
  if (!images) holdings.set(event.workerId, (images = new Map<string, HeldImageRecord>()));
  images.set(key, {
    tenantId: event.tenantId,
    imageId: event.imageId,
    bytes: event.bytes,
    declarations: [...(event.declarations ?? [])].sort(),
  });
}

/** Whether `workerId` holds the image a declaration with `imageKey` resolved to. */
export function holdsImage(holdings: ImageHoldings, workerId: string, imageKey: string): boolean {
  const images = holdings.get(workerId);
  if (!images) return false;
  for (const image of images.values()) {
    if (image.declarations.includes(imageKey)) return true;
  }
  return false;
}

/** The workers that hold the image of `imageKey`, by worker ID as text. */
export function imageHolders(holdings: ImageHoldings, imageKey: string): string[] {
  return [...holdings.keys()]
    .filter((workerId) => holdsImage(holdings, workerId, imageKey))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
