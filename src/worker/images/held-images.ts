/** The worker's report of every image it holds, as the router hears it (ReportHeldImages). */
import type { ReportHeldImagesRequest } from '../../proto/gen/readie/v1/registry.js';
import { heldImagesList } from '../core/images/index.js';
import type { HeldImage } from './image-store.js';

/** The report of `images` (the store's, as of now) for worker `workerId`. */
export function heldImagesRequest(
  workerId: string,
  images: readonly HeldImage[],
): ReportHeldImagesRequest {
  const { images: listed, complete } = heldImagesList(
    images.map(({ manifest, lastUsedMs }) => ({
      tenantId: manifest.tenantId,
      imageId: manifest.id,
      bytes: manifest.bytes,
      declarations: manifest.declarations,
      lastUsedMs,
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
