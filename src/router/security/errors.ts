/** The errors of authentication and authorization, each with the gRPC code the caller receives. */
import { RouterError } from '../errors.js';

/** No credential, or one the router does not know. */
export class UnauthenticatedError extends RouterError {
  override readonly name = 'UnauthenticatedError';
  readonly code = 'UNAUTHENTICATED';
}

/** A known credential asked for something it may not do. */
export class PermissionDeniedError extends RouterError {
  override readonly name = 'PermissionDeniedError';
  readonly code = 'PERMISSION_DENIED';
}

/** A tokens file the router cannot use; the message names the file and the line. */
export class TokensFileError extends RouterError {
  override readonly name = 'TokensFileError';
  readonly code = 'FAILED_PRECONDITION';
}
