/** The errors of authentication and authorization, each with the gRPC code the caller receives. */
import { StatusError } from '../../shared/status-error.js';

/** No credential, or one the router does not know. */
export class UnauthenticatedError extends StatusError {
  override readonly name = 'UnauthenticatedError';
  readonly code = 'UNAUTHENTICATED';
}

/** A known credential asked for something it may not do. */
export class PermissionDeniedError extends StatusError {
  override readonly name = 'PermissionDeniedError';
  readonly code = 'PERMISSION_DENIED';
}

/** A tokens file the router cannot use; the message names the file and the line. */
export class TokensFileError extends StatusError {
  override readonly name = 'TokensFileError';
  readonly code = 'FAILED_PRECONDITION';
}
