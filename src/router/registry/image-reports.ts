/** A worker's image report (RegistryService.ReportImage) from the wire, checked. */
import { InvalidReportError } from '../../core/errors.js';
import type { ImageReport } from '../../core/registry/index.js';
import { ImageOutcome, type ReportImageRequest } from '../../proto/gen/readie/v1/registry.js';

const IMAGE_ID = /^[0-9a-f]{64}$/;
/** The longest tenant ID a worker may name (the router's own IDs are no longer). */
const MAX_TENANT_LENGTH = 256;
/** The most declaration keys one report may carry. */
const MAX_DECLARATIONS = 256;

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
  if (request.tenantId.length > MAX_TENANT_LENGTH) {
    throw new InvalidReportError(`tenant_id has at most ${MAX_TENANT_LENGTH} characters`);
  }
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
