/** `ProxyService` (shell): each `RequestExecution` stream is one `CallRelay`. */
import type { ServerDuplexStream, UntypedServiceImplementation } from '@grpc/grpc-js';
import { CallRelay, type CallPathOptions } from './call-relay.js';
import type { ClientAnswer, ClientMessage } from '../../core/calls/relay-messages.js';

/** The `ProxyService` implementation, for the `RelayProxyService` definition. */
export function proxyService(options: CallPathOptions): UntypedServiceImplementation {
  return {
    requestExecution(call: ServerDuplexStream<ClientMessage, ClientAnswer>) {
      new CallRelay(options, call).start();
    },
  };
}
