/** A grpc.health.v1 check for tests, with the product's own health client. */
import { healthStatus } from '../../src/net/health-client.js';

/** The serving status `address` reports for `serviceName` ('' for the whole server). */
export function checkHealth(address: string, serviceName = ''): Promise<string> {
  return healthStatus(address, serviceName, 30_000);
}
