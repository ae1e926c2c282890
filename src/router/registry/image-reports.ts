/**
 * A worker's image reports from the wire, checked: one image (RegistryService.ReportImage) and
 * every image it holds (ReportHeldImages).
 */
import { InvalidReportError } from '../../core/errors.js';
import {
  heldImagesProblem,
  imageTenantProblem,
  type HeldImagesReport,
  type ImageReport,
} from '../../core/registry/index.js';
import {
  ImageOutcome,
  type ReportHeldImagesRequest,
  type ReportImageRequest,
} from '../../proto/gen/readie/v1/registry.js';

import { MAX_IMAGE_DECLARATIONS as MAX_DECLARATIONS } from '../../shared/held-image-bounds.js';

const IMAGE_ID = /^[0-9a-f]{64}$/;

function declarationsOf(request: ReportImageRequest): string[] {
  if (request.declarations.length > MAX_DECLARATIONS) {
    throw new InvalidReportError(`declarations has at most ${MAX_DECLARATIONS} keys`);
  }
  if (!request.declarations.every((key) => IMAGE_ID.test(key))) {
    throw new InvalidReportError('each of declarations must be 64 lowercase hex digits');
  }
  return [...new Set(request.declarations)].sort();
}

function imageIdOf(request: ReportImageRequest): string {
  if (!IMAGE_ID.test(request.imageId)) {
    throw new InvalidReportError('image_id must be 64 lowercase hex digits');
  }
  return request.imageId;
}

/** The report a request makes; InvalidReportError names what is wrong. */
export function imageReportOf(request: ReportImageRequest): ImageReport {
  const tenant = imageTenantProblem(request.tenantId || null);
  if (tenant !== null) throw new InvalidReportError(`tenant_id: ${tenant}`);
  const base = { workerId: request.workerId, tenantId: request.tenantId || null };
  switch (request.outcome) {
    case ImageOutcome.IMAGE_OUTCOME_BUILT:
      return {
        ...base,
        outcome: 'built',
        imageId: imageIdOf(request),
        bytes: request.bytes,
        buildMs: request.buildMs,
        declarations: declarationsOf(request),
      };
    case ImageOutcome.IMAGE_OUTCOME_BUILD_FAILED:
      return { ...base, outcome: 'build-failed', error: request.error || 'no reason given' };
    case ImageOutcome.IMAGE_OUTCOME_EVICTED:
      return { ...base, outcome: 'evicted', imageId: imageIdOf(request) };
    case ImageOutcome.IMAGE_OUTCOME_REMOVED:
      return { ...base, outcome: 'removed', imageId: imageIdOf(request) };
    case ImageOutcome.IMAGE_OUTCOME_UNSPECIFIED:
      break;
  }
  throw new InvalidReportError('outcome is required: BUILT, BUILD_FAILED, EVICTED or REMOVED');
}

/** A report of every image a worker holds, from the wire; InvalidReportError names what is wrong. */
export function heldImagesReportOf(request: ReportHeldImagesRequest): HeldImagesReport {
  if (request.workerId === '') throw new InvalidReportError('worker_id is required');
  const report: HeldImagesReport = {
    workerId: request.workerId,
    complete: request.complete,
    images: request.images.map((image) => ({
      tenantId: image.tenantId || null,
      imageId: image.imageId,
      bytes: image.bytes,
      declarations: image.declarations,
    })),
  };
  const problem = heldImagesProblem(report);
  if (problem !== null) throw new InvalidReportError(problem);
  return report;
}
