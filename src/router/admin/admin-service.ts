/**
 * `AdminService` (shell): the operator's view of the live router. Only an operator credential
 * reaches these handlers (the credential interceptor refuses every other one), and each handler
 * checks again, so the service stays closed even on a server without the interceptor.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type {
  AdminServiceServer,
  StatusRequest,
  StatusResponse,
} from '../../proto/gen/readie/v1/admin.js';
import { toServiceError } from '../grpc-status.js';
import type { Logger } from '../observability/logger.js';
import { pinHandlers, type PinServiceOptions } from '../routing/index.js';
import { principalLogFields, type RouterCredentials } from '../security/index.js';
import { adminHistoryHandlers, type HistoryHandlerOptions } from '../history/index.js';
import { adminImageHandlers, type ImageHandlerOptions } from '../images/index.js';
import { quotaHandlers } from './quota-service.js';
import { statusOf, type LiveCounts } from './status-view.js';

/** What the admin service reads (and, for pin changes, records). */
export interface AdminServiceOptions extends PinServiceOptions {
  readonly state: () => ClusterState;
  readonly live: () => LiveCounts;
  readonly credentials: RouterCredentials;
  readonly logger: Logger;
  /** The call history and the relay of calls' output. */
  readonly history: Omit<HistoryHandlerOptions, 'credentials' | 'clock'>;
  /** Asking the workers about their images. */
  readonly images: Omit<ImageHandlerOptions, 'credentials' | 'logger'>;
}

/** The `AdminService` implementation. */
export function adminService(options: AdminServiceOptions): AdminServiceServer {
  const { credentials, logger } = options;
  return {
    ...pinHandlers(options),
    ...quotaHandlers(options),
    ...adminImageHandlers({ ...options.images, credentials, logger }),
    ...adminHistoryHandlers({ ...options.history, credentials, clock: options.clock }),
    status(
      call: ServerUnaryCall<StatusRequest, StatusResponse>,
      callback: sendUnaryData<StatusResponse>,
    ) {
      try {
        const principal = credentials.authorize(call.metadata, call.getPath());
        logger.debug(principalLogFields(principal), 'admin status asked');
        callback(
          null,
          statusOf(options.state(), options.live(), {
            includeExpiredSessions: call.request.includeExpiredSessions,
          }),
        );
      } catch (error) {
        callback(toServiceError(error));
      }
    },
  };
}
