/**
 * What a worker's report of every image it holds lists (RegistryService.ReportHeldImages,
 * docs/images.md): every image, unless there are more than a report may carry; then the most
 * recently used that fit (in count, keys and bytes), and the report says it is not complete (the router then forgets
 * nothing it leaves out). Pure: the shell passes its images.
 */
import {
  MAX_HELD_IMAGE_DECLARATIONS,
  MAX_HELD_IMAGES,
  MAX_HELD_IMAGES_REPORT_BYTES,
  MAX_IMAGE_DECLARATIONS,
} from '../../../shared/held-image-bounds.js';

/** One image on disk, as the report sees it. */
export interface ReportableImage {
  /** `''`: calls without a tenant. */
  readonly tenantId: string;
  readonly imageId: string;
  readonly bytes: number;
  readonly declarations: readonly string[];
  /** When a call last used it (or it was built, or found at the worker's start), epoch ms. */
  readonly lastUsedMs: number;
}

/** The images a report lists, and whether they are all the worker holds. */
export interface HeldImagesList {
  readonly images: readonly ReportableImage[];
  readonly complete: boolean;
}

/**
 * The images to report: all of them when they fit the report's bounds, else the most recently
 * used that do (`complete` false). An image's declaration keys beyond the bound per image are
 * left out (the router then knows it by the others).
 */
export function heldImagesList(images: readonly ReportableImage[]): HeldImagesList {
  const newestFirst = [...images].sort(
    (a, b) =>
      b.lastUsedMs - a.lastUsedMs ||
      (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0) ||
      (a.imageId < b.imageId ? -1 : a.imageId > b.imageId ? 1 : 0),
  );
  const listed: ReportableImage[] = [];
  const utf8 = new TextEncoder();
  let keys = 0;
  let bytes = 0;
  for (const image of newestFirst) {
    const declarations = image.declarations.slice(0, MAX_IMAGE_DECLARATIONS);
    // Each field with its tag and length (at most 3 bytes each), the size as a varint.
    const entryBytes =
      utf8.encode(image.tenantId).length + 3 + 67 + 11 + declarations.length * 67 + 4;
    if (
      listed.length === MAX_HELD_IMAGES ||
      keys + declarations.length > MAX_HELD_IMAGE_DECLARATIONS ||
      bytes + entryBytes > MAX_HELD_IMAGES_REPORT_BYTES
    ) {
      return { images: listed, complete: false };
    }
    keys += declarations.length;
    bytes += entryBytes;
    listed.push({ ...image, declarations });
  }
  return { images: listed, complete: true };
}
