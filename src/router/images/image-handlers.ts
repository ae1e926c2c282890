/**
 * The image handlers of `AdminService` (an operator's: every tenant's images, removal) and of
 * `TenantService` (a tenant's own images: the tenant is the one its credential names, so a tenant
 * never sees another's image, even one with the same identity). Shell over `image-fanout.ts`.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import { checkImageSpec } from '../../core/calls/index.js';
import type {
  AdminServiceRemoveImageRequest,
  AdminServiceRemoveImageResponse,
  AdminServiceServer,
  ImagesRequest,
  ImagesResponse,
} from '../../proto/gen/readie/v1/admin.js';
import type {
  OwnImagesRequest,
  OwnImagesResponse,
  TenantServiceServer,
} from '../../proto/gen/readie/v1/tenant.js';
import { toServiceError } from '../grpc-status.js';
import type { Logger } from '../observability/logger.js';
import { principalLogFields, tenantOf, type RouterCredentials } from '../security/index.js';
import {
  imagesOf,
  listWorkerImages,
  removeWorkerImage,
  type ImageFanoutDeps,
} from './image-fanout.js';
import { checkedImageName, checkedTenant, checkedWorkerId } from './image-requests.js';

/** What the image handlers need. */
export interface ImageHandlerOptions extends ImageFanoutDeps {
  readonly credentials: RouterCredentials;
  readonly logger: Logger;
}

/** `AdminService.Images` and `AdminService.RemoveImage`. */
export function adminImageHandlers(
  options: ImageHandlerOptions,
): Pick<AdminServiceServer, 'images' | 'removeImage'> {
  const { credentials, logger } = options;
  return {
    images(
      call: ServerUnaryCall<ImagesRequest, ImagesResponse>,
      callback: sendUnaryData<ImagesResponse>,
    ) {
      void (async () => {
        credentials.authorize(call.metadata, call.getPath());
        const tenantId = checkedTenant(call.request.tenantId);
        const listings = await listWorkerImages(options, tenantId, undefined);
        return {
          images: imagesOf(listings),
          workers: listings.map((listing) => ({
            workerId: listing.workerId,
            count: listing.answer?.cacheCount ?? 0,
            bytes: listing.answer?.cacheBytes ?? 0,
            capacity: listing.answer?.cacheCapacity ?? 0,
            error: listing.error,
          })),
        };
      })().then(
        (answer) => callback(null, answer),
        (error: unknown) => callback(toServiceError(error)),
      );
    },
    removeImage(
      call: ServerUnaryCall<AdminServiceRemoveImageRequest, AdminServiceRemoveImageResponse>,
      callback: sendUnaryData<AdminServiceRemoveImageResponse>,
    ) {
      void (async () => {
        const principal = credentials.authorize(call.metadata, call.getPath());
        const request = {
          imageId: checkedImageName(call.request.imageId),
          tenantId: checkedTenant(call.request.tenantId),
          workerId: checkedWorkerId(call.request.workerId),
        };
        const outcome = await removeWorkerImage(options, request);
        logger.info(
          {
            ...principalLogFields(principal),
            image: request.imageId,
            workers: outcome.removed.map((image) => image.workerId),
          },
          'image removed by an operator',
        );
        return outcome;
      })().then(
        (answer) => callback(null, answer),
        (error: unknown) => callback(toServiceError(error)),
      );
    },
  };
}

/** `TenantService.OwnImages`. */
export function tenantImageHandlers(
  options: ImageHandlerOptions,
): Pick<TenantServiceServer, 'ownImages'> {
  const { credentials } = options;
  return {
    ownImages(
      call: ServerUnaryCall<OwnImagesRequest, OwnImagesResponse>,
      callback: sendUnaryData<OwnImagesResponse>,
    ) {
      void (async () => {
        // Calls without a tenant (the development modes) share the tenant "".
        const tenantId = tenantOf(credentials.authorize(call.metadata, call.getPath())) ?? '';
        if (call.request.image) checkImageSpec(call.request.image);
        const listings = await listWorkerImages(options, tenantId, call.request.image);
        // The workers were asked for this tenant's alone; kept so even if one answered more.
        const images = imagesOf(listings).filter((image) => image.tenantId === tenantId);
        return { tenantId, images };
      })().then(
        (answer) => callback(null, answer),
        (error: unknown) => callback(toServiceError(error)),
      );
    },
  };
}
