/** The worker's report of every image it holds, as the router hears it (ReportHeldImages). */
import type { ReportHeldImagesRequest } from '../../proto/gen/readie/v1/registry.js';
import { heldImagesList } from '../core/images/index.js';
import { imageBytes, type HeldImage } from './image-store.js';

/** The report of `images` (the store's, as of now) for worker `workerId`. */
export function heldImagesRequest(
  workerId: string,
  images: readonly HeldImage[],
): ReportHeldImagesRequest {
  const { images: listed, complete } = heldImagesList(
    images.map((image) => ({
      tenantId: image.manifest.tenantId,
      imageId: image.manifest.id,
      bytes: imageBytes(image),
      declarations: image.manifest.declarations,
      lastUsedMs: image.lastUsedMs,
    })),
  );
  return {
    workerId,
    complete,
    images: listed.map(({ tenantId, imageId, bytes, declarations }) => ({
      tenantId,
      imageId,
      bytes,
      declarations: [...declarations],
    })),
  };
}
