/** The router's refusals of image listings and removals: each a `StatusError` with its code. */
import { StatusError } from '../../shared/status-error.js';

/** A malformed image request: a bad identity, tenant or worker ID. */
export class ImageRequestError extends StatusError {
  override readonly name = 'ImageRequestError';
  readonly code = 'INVALID_ARGUMENT';
}

/** No worker that is up holds the image named (for the tenant named), or no such worker is up. */
export class ImageNotHeldError extends StatusError {
  override readonly name = 'ImageNotHeldError';
  readonly code = 'NOT_FOUND';
}

/** Every worker that holds the image refused its removal (in use), or named it ambiguously. */
export class ImageRemovalRefusedError extends StatusError {
  constructor(
    readonly code: 'FAILED_PRECONDITION' | 'INVALID_ARGUMENT',
    message: string,
  ) {
    super(message);
  }
  override readonly name = 'ImageRemovalRefusedError';
}
