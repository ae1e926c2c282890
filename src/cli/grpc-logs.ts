/**
 * grpc-js writes its own diagnostics to stderr ("E No address added out of total 1 resolved"),
 * which would break the rule that a failed start prints one line. The commands send them to
 * their JSON log at debug level instead, where `--log-level debug` shows them.
 */
import { setLogger } from '@grpc/grpc-js';
import { format } from 'node:util';

/** What the commands log with (pino's shape). */
interface DebugLogger {
  debug(fields: object, message: string): void;
}

/** Routes grpc-js's own log lines into `logger` at debug level. */
export function routeGrpcLogs(logger: DebugLogger): void {
  const write = (...args: unknown[]) => logger.debug({ grpc: format(...args) }, 'grpc-js');
  setLogger({ error: write, info: write, debug: write });
}
