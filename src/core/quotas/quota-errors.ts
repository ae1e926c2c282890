/** A quota change refused: its gRPC code and the words an operator acts on (nothing was appended). */
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { StatusError } from '../../shared/status-error.js';

/** An operator's quota change that was refused; nothing was appended. */
export class QuotaChangeRefusedError extends StatusError {
  override readonly name = 'QuotaChangeRefusedError';

  constructor(
    readonly code: GrpcCodeName,
    message: string,
  ) {
    super(message);
  }
}
