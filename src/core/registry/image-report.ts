/**
 * A worker's report of a tenant's image (docs/images.md) as one event: `ImageBuilt`,
 * `ImageBuildFailed` or `ImageRemoved`. A report from a worker the router does not know (or
 * evicted) records nothing: the worker must report its status first. Pure.
 */
import type { Cause } from '../../events/cause.js';
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { liveWorkerOf } from '../consequences/index.js';
import type { Decision } from '../decision.js';

/** The longest build error the log keeps (the installer's first error line and a traceback). */
export const MAX_IMAGE_ERROR_LENGTH = 8192;

/** One image report, checked. */
export type ImageReport =
  | {
      readonly workerId: string;
      readonly tenantId: string | null;
      readonly outcome: 'built';
      readonly imageId: string;
      readonly bytes: number;
      readonly buildMs: number;
      /** The keys of the declarations that resolved to it (`CallRequested.imageKey`). */
      readonly declarations: readonly string[];
    }
  | {
      readonly workerId: string;
      readonly tenantId: string | null;
      readonly outcome: 'build-failed';
      readonly error: string;
    }
  | {
      readonly workerId: string;
      readonly tenantId: string | null;
      readonly outcome: 'evicted' | 'removed';
      readonly imageId: string;
    };

/** An image report's decision (`report:WORKER`). */
export interface ImageReportDecision extends Decision {
  /** False when the router does not know the worker: it must report its status again. */
  readonly registered: boolean;
}

/** The event of an image report. */
export function decideImageReport(state: ClusterState, report: ImageReport): ImageReportDecision {
  const cause: Cause = { kind: 'report', workerId: report.workerId };
  if (!liveWorkerOf(state, report.workerId)) return { cause, registered: false, events: [] };
  const { workerId, tenantId } = report;
  let event: NewEvent;
  switch (report.outcome) {
    case 'built':
      event = {
        type: 'ImageBuilt',
        workerId,
        tenantId,
        imageId: report.imageId,
        bytes: report.bytes,
        buildMs: report.buildMs,
        declarations: report.declarations.length === 0 ? null : [...report.declarations],
      };
      break;
    case 'build-failed':
      event = {
        type: 'ImageBuildFailed',
        workerId,
        tenantId,
        error: report.error.slice(0, MAX_IMAGE_ERROR_LENGTH),
      };
      break;
    case 'evicted':
    case 'removed':
      event = {
        type: 'ImageRemoved',
        workerId,
        tenantId,
        imageId: report.imageId,
        reason: report.outcome,
      };
      break;
  }
  return { cause, registered: true, events: [event] };
}
