/**
 * Asks the workers that are up about their images (shell): listings and removals go to every
 * worker that is ready or leaving and has an address (or the one named), each bounded by
 * {@link WORKER_ANSWER_MS}; a worker that does not answer is named in the answer, never waited
 * for past that. The workers are the truth of what they hold (sizes, last use, calls using an
 * image); the router's log records each removal when the worker reports it (`ImageRemoved`).
 */
import { status, type Metadata, type ServiceError } from '@grpc/grpc-js';
import type { ClusterState, WorkerRecord } from '../../projections/cluster-state.js';
import { compareText } from '../../projections/queries.js';
import type { ImageSpec } from '../../proto/gen/readie/v1/call.js';
import type {
  HeldImageView,
  ListImagesResponse,
  RemoveImageResponse,
} from '../../proto/gen/readie/v1/images.js';
import type { WorkerConnections } from '../workers/index.js';
import { printable } from '../../shared/printable.js';
import { ImageNotHeldError, ImageRemovalRefusedError } from './image-errors.js';

/** How long one worker may take to answer an image request. */
export const WORKER_ANSWER_MS = 5_000;

/** What asking the workers needs. */
export interface ImageFanoutDeps {
  readonly state: () => ClusterState;
  readonly connections: Pick<WorkerConnections, 'images'>;
  readonly workerMetadata: Metadata;
  /** Epoch ms now: each request's deadline counts from it. */
  readonly clock: () => number;
}

/** One worker's answer to a listing, or why there is none. */
export interface WorkerListing {
  readonly workerId: string;
  readonly answer: ListImagesResponse | null;
  readonly error: string;
}

/** The workers asked: up (ready or leaving) with an address, by worker ID. */
export function workersUp(state: ClusterState): WorkerRecord[] {
  return [...state.workers.values()]
    .filter(
      (worker) =>
        (worker.status === 'ready' || worker.status === 'leaving') && worker.address !== null,
    )
    .sort((a, b) => compareText(a.workerId, b.workerId));
}

function deadline(deps: ImageFanoutDeps): { deadline: Date } {
  return { deadline: new Date(deps.clock() + WORKER_ANSWER_MS) };
}

function why(error: ServiceError): string {
  return error.code === status.DEADLINE_EXCEEDED
    ? `no answer in ${WORKER_ANSWER_MS / 1000} s`
    : error.details || error.message;
}

/** Every worker's images of `tenantId` (undefined: every tenant's), narrowed to `image`. */
export function listWorkerImages(
  deps: ImageFanoutDeps,
  tenantId: string | undefined,
  image: ImageSpec | undefined,
): Promise<WorkerListing[]> {
  return listOn(deps, workersUp(deps.state()), tenantId, image);
}

function listOn(
  deps: ImageFanoutDeps,
  workers: readonly WorkerRecord[],
  tenantId: string | undefined,
  image: ImageSpec | undefined,
): Promise<WorkerListing[]> {
  return Promise.all(
    workers.map(
      (worker) =>
        new Promise<WorkerListing>((resolve) => {
          deps.connections
            .images(worker.address ?? '')
            .listImages(
              { tenantId, image },
              deps.workerMetadata.clone(),
              deadline(deps),
              (error, answer) =>
                resolve(
                  error
                    ? { workerId: worker.workerId, answer: null, error: why(error) }
                    : { workerId: worker.workerId, answer: answer, error: '' },
                ),
            );
        }),
    ),
  );
}

/** Every image of the listings, by tenant, identity, then worker. */
export function imagesOf(listings: readonly WorkerListing[]): HeldImageView[] {
  return listings
    .flatMap((listing) =>
      (listing.answer?.images ?? []).map((image) => ({ ...image, workerId: listing.workerId })),
    )
    .sort(
      (a, b) =>
        compareText(a.tenantId, b.tenantId) ||
        compareText(a.imageId, b.imageId) ||
        compareText(a.workerId, b.workerId),
    );
}

type RemovalOutcome =
  | { readonly workerId: string; readonly removed: HeldImageView[] }
  | { readonly workerId: string; readonly code: status; readonly error: string };

function removeOn(
  deps: ImageFanoutDeps,
  worker: WorkerRecord,
  imageId: string,
  tenantId: string | undefined,
): Promise<RemovalOutcome> {
  return new Promise((resolve) => {
    deps.connections
      .images(worker.address ?? '')
      .removeImage(
        { imageId, tenantId },
        deps.workerMetadata.clone(),
        deadline(deps),
        (error, answer: RemoveImageResponse | undefined) =>
          resolve(
            error
              ? { workerId: worker.workerId, code: error.code, error: why(error) }
              : { workerId: worker.workerId, removed: answer?.removed ?? [] },
          ),
      );
  });
}

/** An image's whole identity: 64 hex digits. */
const IDENTITY = /^[0-9a-f]{64}$/;

/**
 * The identity a removal names: the name itself when it is whole; for a prefix, the one identity
 * the targets hold for the tenant asked about (each worker refuses a prefix naming several of its
 * own images, but two workers may each hold one). INVALID_ARGUMENT when it names several; the
 * name as given when the targets hold none (their removals then answer NOT_FOUND).
 */
async function identityOf(
  deps: ImageFanoutDeps,
  targets: readonly WorkerRecord[],
  request: { imageId: string; tenantId: string | undefined },
): Promise<string> {
  const prefix = request.imageId.replace(/^image:/, '');
  if (IDENTITY.test(prefix)) return prefix;
  const matching = imagesOf(await listOn(deps, targets, request.tenantId, undefined)).filter(
    (image) => image.imageId.startsWith(prefix),
  );
  const names = new Map(matching.map((image) => [image.imageId, image.name]));
  if (names.size > 1) {
    throw new ImageRemovalRefusedError(
      'INVALID_ARGUMENT',
      `${request.imageId} names ${names.size} images on the workers that are up (${[
        ...names.values(),
      ].join(', ')}): give more of its identity`,
    );
  }
  return [...names.keys()][0] ?? request.imageId;
}

/**
 * Removes the image from the workers that hold it (or from `workerId` alone): the images removed,
 * and each other worker's refusal. NOT_FOUND when none held it; a refusal's code when every
 * holder refused.
 */
export async function removeWorkerImage(
  deps: ImageFanoutDeps,
  request: { imageId: string; tenantId: string | undefined; workerId: string },
): Promise<{ removed: HeldImageView[]; refusals: string[] }> {
  const up = workersUp(deps.state());
  const targets =
    request.workerId === '' ? up : up.filter((worker) => worker.workerId === request.workerId);
  const whose = request.tenantId === undefined ? '' : ` of tenant "${printable(request.tenantId)}"`;
  if (targets.length === 0) {
    throw new ImageNotHeldError(
      request.workerId === ''
        ? 'no worker is up: there is no image to remove'
        : `no worker ${printable(request.workerId)} is up (workers up: ${
            up.map((worker) => printable(worker.workerId)).join(', ') || 'none'
          })`,
    );
  }
  const imageId = await identityOf(deps, targets, request);
  const outcomes = await Promise.all(
    targets.map((worker) => removeOn(deps, worker, imageId, request.tenantId)),
  );
  const removed = outcomes.flatMap((outcome) => ('removed' in outcome ? outcome.removed : []));
  const refused = outcomes.filter(
    (outcome): outcome is Extract<RemovalOutcome, { code: status }> =>
      'code' in outcome && outcome.code !== status.NOT_FOUND,
  );
  const refusals = refused.map(
    (outcome) => `worker ${printable(outcome.workerId)}: ${printable(outcome.error)}`,
  );
  if (removed.length > 0) return { removed, refusals };
  const firm = refused.find(
    (outcome) =>
      outcome.code === status.FAILED_PRECONDITION || outcome.code === status.INVALID_ARGUMENT,
  );
  if (firm) {
    throw new ImageRemovalRefusedError(
      firm.code === status.INVALID_ARGUMENT ? 'INVALID_ARGUMENT' : 'FAILED_PRECONDITION',
      refusals.join('; '),
    );
  }
  const unanswered = refused.length === 0 ? '' : ` (${refusals.join('; ')})`;
  throw new ImageNotHeldError(
    `no ${request.workerId === '' ? 'worker that is up' : 'such worker'} holds image ${request.imageId}${whose}${unanswered}`,
  );
}
