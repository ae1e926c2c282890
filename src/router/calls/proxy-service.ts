/** `ProxyService` (shell): each `RequestExecution` stream is one `CallRelay`. */
import type { ProxyServiceServer } from '../../proto/gen/readie/v1/proxy.js';
import { CallRelay, type CallPathOptions } from './call-relay.js';

/** The `ProxyService` implementation. */
export function proxyService(options: CallPathOptions): ProxyServiceServer {
  return {
    requestExecution(call) {
      new CallRelay(options, call).start();
    },
  };
}
