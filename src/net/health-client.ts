/**
 * A client of the standard `grpc.health.v1.Health` service, from the service definition the
 * maintained `grpc-health-check` package ships. The router probes workers with it; `readie up`
 * asks its router whether it serves before it reads the router's log.
 */
import {
  credentials as grpcCredentials,
  makeGenericClientConstructor,
  Metadata,
  type CallOptions,
  type ChannelCredentials,
  type Client,
  type ClientUnaryCall,
  type ServiceDefinition,
  type ServiceError,
} from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';

/** A `grpc.health.v1.HealthCheckResponse` as the health package decodes it. */
export interface HealthCheckResponse {
  /** `SERVING`, `NOT_SERVING`, `UNKNOWN` or `SERVICE_UNKNOWN`. */
  readonly status: string;
}

/** A client of the standard `grpc.health.v1.Health` service. */
export interface HealthClient extends Client {
  check(
    request: { service: string },
    metadata: Metadata,
    options: Partial<CallOptions>,
    callback: (error: ServiceError | null, response?: HealthCheckResponse) => void,
  ): ClientUnaryCall;
}

const healthDefinition: unknown = healthService;
/** The constructor of health clients. */
export const HealthClient = makeGenericClientConstructor(
  healthDefinition as ServiceDefinition,
  'grpc.health.v1.Health',
) as unknown as new (
  address: string,
  credentials: ChannelCredentials,
  options?: Record<string, unknown>,
) => HealthClient;

/**
 * The status `address` reports for `service` ('' for the whole server) within `timeoutMs`, on a
 * channel of its own (plaintext unless `credentials` say otherwise); the error when it does not
 * answer one (nothing listens, something that is not a gRPC server listens, the time ran out).
 */
export function healthStatus(
  address: string,
  service: string,
  timeoutMs: number,
  credentials: ChannelCredentials = grpcCredentials.createInsecure(),
): Promise<string> {
  const client = new HealthClient(address, credentials);
  return new Promise<string>((resolve, reject) => {
    client.check(
      { service },
      new Metadata(),
      { deadline: Date.now() + timeoutMs },
      (error, response) => {
        if (error || !response) reject(error ?? new Error('an empty health answer'));
        else resolve(response.status);
      },
    );
  }).finally(() => client.close());
}
