/**
 * The image cache's policy (docs/images.md): images on a worker are bounded by disk
 * (`--image-cache-size`); making room evicts the least recently used images that no call is
 * using; an image larger than the whole cache is never kept. Pure: the shell passes the images,
 * their sizes, last uses and holds.
 */

/** One image on disk, as the policy sees it. */
export interface CachedImage {
  /** The image's key in the cache (tenant tag and identity). */
  readonly key: string;
  readonly bytes: number;
  /** When a call last used it (or it was built), epoch ms. */
  readonly lastUsedMs: number;
  /** Calls using it now: it is never evicted while any does. */
  readonly inUse: number;
}

/** What making room for an image of `bytes` takes. */
export type RoomPlan =
  | { readonly fits: true; readonly evict: readonly string[] }
  | { readonly fits: false; readonly reason: string };

/** A byte count as people read it: bytes, KiB, MiB or GiB with one decimal. */
export function mebibytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  const units = ['KiB', 'MiB', 'GiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * The images to evict, least recently used first (equal: key as text), so that `bytes` more fit
 * in `capacity` (0: no bound); refused when the image alone exceeds the cache, or the images in
 * use leave too little room.
 */
export function planImageRoom(
  images: readonly CachedImage[],
  bytes: number,
  capacity: number,
): RoomPlan {
  if (capacity <= 0) return { fits: true, evict: [] };
  if (bytes > capacity) {
    return {
      fits: false,
      reason: `the image is ${mebibytes(bytes)}, larger than this worker's image cache of ${mebibytes(capacity)} (--image-cache-size)`,
    };
  }
  let used = images.reduce((sum, image) => sum + image.bytes, 0);
  const evict: string[] = [];
  const candidates = images
    .filter((image) => image.inUse === 0)
    .sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const image of candidates) {
    if (used + bytes <= capacity) break;
    evict.push(image.key);
    used -= image.bytes;
  }
  if (used + bytes > capacity) {
    return {
      fits: false,
      reason: `the image is ${mebibytes(bytes)} and images in use hold ${mebibytes(used)} of this worker's image cache of ${mebibytes(capacity)} (--image-cache-size): try again when they are idle`,
    };
  }
  return { fits: true, evict };
}
