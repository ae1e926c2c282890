/** The standard grpc.health.v1 service on the worker (package grpc-health-check). */
import type { Server, ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js';
import { decodingService } from '../shared/wire-decoding.js';
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';

/** The services whose health is reported: the server as a whole ('') and ExecutionService. */
const SERVICES = ['', 'readie.v1.ExecutionService'];

/** Health reporting for a worker's server. */
export class WorkerHealth {
  private readonly health = new HealthImplementation(
    Object.fromEntries(SERVICES.map((service) => [service, 'NOT_SERVING'])),
  );

  /** Adds grpc.health.v1.Health to `server`. */
  addTo(server: Server): void {
    // A request the worker cannot decode gets INVALID_ARGUMENT (src/shared/wire-decoding.ts).
    const decoding = {
      addService: (definition: ServiceDefinition, implementation: UntypedServiceImplementation) =>
        server.addService(...decodingService(definition, implementation)),
    };
    this.health.addToServer(decoding);
  }

  /** Sets every reported service to `status`. */
  set(status: ServingStatus): void {
    for (const service of SERVICES) this.health.setStatus(service, status);
  }
}
