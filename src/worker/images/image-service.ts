/**
 * readie.v1.ImageService on the worker: the router asks which images it holds (`ListImages`) and
 * removes one (`RemoveImage`, reported as `ImageRemoved` like an eviction). The router's
 * credential alone may call it (anyone with `--auth none`).
 */
import { status, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  HeldImageView,
  ImageServiceServer,
  ListImagesRequest,
  ListImagesResponse,
  RemoveImageRequest,
  RemoveImageResponse,
} from '../../proto/gen/readie/v1/images.js';
import { StatusError } from '../../shared/status-error.js';
import type { WorkerCredentials } from '../credentials.js';
import { WorkerUnusableError } from '../core/errors.js';
import { imageName } from '../core/images/index.js';
import { imageBytes, type HeldImage, type ImageStore } from './image-store.js';

/** What the service needs. */
export interface ImageServiceDeps {
  readonly workerId: string;
  /** The worker's images; null while it cannot run containers. */
  readonly images: () => ImageStore | null;
  readonly credentials: Pick<WorkerCredentials, 'checkRouter'>;
  readonly log: Logger;
}

/** One held image as the wire shows it. */
export function heldImageView(workerId: string, image: HeldImage): HeldImageView {
  return {
    workerId,
    tenantId: image.manifest.tenantId,
    imageId: image.manifest.id,
    name: imageName(image.manifest.id),
    bytes: imageBytes(image),
    lastUsedAt: new Date(image.lastUsedMs).toISOString(),
    inUse: image.inUse,
  };
}

function byTenantThenId(a: HeldImageView, b: HeldImageView): number {
  const tenant = a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0;
  if (tenant !== 0) return tenant;
  return a.imageId < b.imageId ? -1 : a.imageId > b.imageId ? 1 : 0;
}

async function answer<Req, Res>(
  deps: ImageServiceDeps,
  call: ServerUnaryCall<Req, Res>,
  callback: sendUnaryData<Res>,
  handle: (images: ImageStore, request: Req) => Promise<Res> | Res,
): Promise<void> {
  try {
    deps.credentials.checkRouter(call.metadata);
    const images = deps.images();
    if (!images) throw new WorkerUnusableError('this worker holds no images: it is in error');
    callback(null, await handle(images, call.request));
  } catch (error) {
    const failure = error instanceof StatusError ? error : null;
    deps.log.info(
      { path: call.getPath(), error: (error as Error).message },
      'image request refused',
    );
    callback({
      code: failure ? status[failure.code] : status.INTERNAL,
      details: (error as Error).message,
    });
  }
}

/** The service implementation to add to the worker's gRPC server. */
export function imageService(deps: ImageServiceDeps): ImageServiceServer {
  return {
    listImages(call: ServerUnaryCall<ListImagesRequest, ListImagesResponse>, callback) {
      void answer(deps, call, callback, (images, request) => {
        const held = images.held(request.tenantId ?? null, request.image ?? null);
        return {
          images: held.map((image) => heldImageView(deps.workerId, image)).sort(byTenantThenId),
          cacheBytes: images.bytes,
          cacheCapacity: images.capacity,
          cacheCount: images.list().length,
        };
      });
    },
    removeImage(call: ServerUnaryCall<RemoveImageRequest, RemoveImageResponse>, callback) {
      void answer(deps, call, callback, async (images, request) => {
        const removed = await images.remove(request.tenantId ?? null, request.imageId);
        deps.log.info(
          { image: request.imageId, count: removed.length },
          'image removed by the router',
        );
        return { removed: removed.map((image) => heldImageView(deps.workerId, image)) };
      });
    },
  };
}
