/**
 * `ProxyService` (shell): each `RequestExecution` stream is one `CallRelay`, for the tenant the
 * caller's credential names (null in the development modes).
 */
import type { ServerDuplexStream, UntypedServiceImplementation } from '@grpc/grpc-js';
import { toServiceError } from '../../src/router/grpc-status.js';
import { tenantOf, type RouterCredentials } from '../../src/router/security/index.js';
import { NOT_STARTED } from '../../src/shared/call-trailers.js';
import { CallRelay, type CallPathOptions } from '../../src/router/calls/call-relay.js';
import { GrpcJsClientEnd } from './grpc-js-ends.js';
import { trailerEntries } from '../../src/core/calls/answer-trailers.js';
import { trailerMetadata } from './trailer-metadata.js';
import type { ClientAnswer, ClientMessage } from '../../src/core/calls/relay-messages.js';

/** The `ProxyService` implementation, for the `RelayProxyService` definition. */
export function proxyService(
  options: CallPathOptions,
  credentials: RouterCredentials,
): UntypedServiceImplementation {
  return {
    requestExecution(call: ServerDuplexStream<ClientMessage, ClientAnswer>) {
      let tenantId: string | null;
      try {
        tenantId = tenantOf(credentials.authorize(call.metadata, call.getPath()));
      } catch (error) {
        // The interceptor refuses such calls first; a reload in between can still get here.
        // Nothing ran: the refusal says so, as every refusal before placement does.
        call.emit('error', {
          ...toServiceError(error),
          metadata: trailerMetadata(trailerEntries(NOT_STARTED)),
        });
        return;
      }
      new CallRelay(options, new GrpcJsClientEnd(call), tenantId).start();
    },
  };
}
