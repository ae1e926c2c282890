/** A grpc.health.v1 client for tests (the service definition that grpc-health-check ships). */
import { credentials, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { service } from 'grpc-health-check';

type CheckClient = {
  check(
    request: { service: string },
    callback: (error: ServiceError | null, response: { status: string }) => void,
  ): void;
  close(): void;
};

const HealthClient = makeGenericClientConstructor(service, 'grpc.health.v1.Health');

/** The serving status `address` reports for `serviceName` ('' for the whole server). */
export async function checkHealth(address: string, serviceName = ''): Promise<string> {
  const client = new HealthClient(address, credentials.createInsecure()) as unknown as CheckClient;
  try {
    return await new Promise((resolve, reject) =>
      client.check({ service: serviceName }, (error, response) =>
        error ? reject(error) : resolve(response.status),
      ),
    );
  } finally {
    client.close();
  }
}
