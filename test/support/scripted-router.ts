/**
 * A scripted RegistryService: a real gRPC server on loopback that records every report a worker
 * sends and answers as told. The only test double the worker tests use.
 */
import { Server, ServerCredentials, status, type Metadata } from '@grpc/grpc-js';
import {
  RegistryServiceService,
  type RegistryServiceServer,
  type ReportContainerStateRequest,
  type ReportHeldImagesRequest,
  type ReportImageRequest,
  type ReportStatusRequest,
  type ReportUtilizationRequest,
} from '../../src/proto/gen/readie/v1/registry.js';
import type { ReportResidencyRequest } from '../../src/proto/gen/readie/v1/residency.js';

/** One recorded report, in arrival order. */
export type Report =
  | { kind: 'status'; request: ReportStatusRequest; authorization: string }
  | { kind: 'utilization'; request: ReportUtilizationRequest; authorization: string }
  | { kind: 'container'; request: ReportContainerStateRequest; authorization: string }
  | { kind: 'residency'; request: ReportResidencyRequest; authorization: string }
  | { kind: 'image'; request: ReportImageRequest; authorization: string }
  | { kind: 'held-images'; request: ReportHeldImagesRequest; authorization: string };

function authorizationOf(metadata: Metadata): string {
  const value = metadata.get('authorization')[0];
  return typeof value === 'string' ? value : '';
}

/** A recording router. */
export class ScriptedRouter {
  readonly reports: Report[] = [];
  /** What ReportUtilization and ReportContainerState answer for `registered`. */
  registered = true;
  private server: Server | null = null;
  private listeners: (() => void)[] = [];

  private constructor(readonly port: number) {}

  /** host:port. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts serving on `port` (0 picks a free one). */
  static async start(
    port = 0,
    credentials: ServerCredentials = ServerCredentials.createInsecure(),
  ): Promise<ScriptedRouter> {
    const server = new Server();
    let router: ScriptedRouter | null = null;
    const record = (report: Report) => {
      router!.reports.push(report);
      for (const listener of router!.listeners.splice(0)) listener();
    };
    const implementation: RegistryServiceServer = {
      reportStatus: (call, callback) => {
        record({
          kind: 'status',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, {});
      },
      reportUtilization: (call, callback) => {
        record({
          kind: 'utilization',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, { registered: router!.registered });
      },
      reportContainerState: (call, callback) => {
        record({
          kind: 'container',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, { registered: router!.registered });
      },
      reportResidency: (call, callback) => {
        record({
          kind: 'residency',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, { registered: router!.registered });
      },
      reportImage: (call, callback) => {
        record({
          kind: 'image',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, { registered: router!.registered });
      },
      reportHeldImages: (call, callback) => {
        record({
          kind: 'held-images',
          request: call.request,
          authorization: authorizationOf(call.metadata),
        });
        callback(null, { registered: router!.registered });
      },
    };
    server.addService(RegistryServiceService, implementation);
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, credentials, (error, p) =>
        error ? reject(error) : resolve(p),
      ),
    );
    router = new ScriptedRouter(bound);
    router.server = server;
    return router;
  }

  /** Status reports so far. */
  statuses(): ReportStatusRequest[] {
    return this.reports.flatMap((report) => (report.kind === 'status' ? [report.request] : []));
  }

  /** Residency reports so far. */
  residency(): ReportResidencyRequest[] {
    return this.reports.flatMap((report) => (report.kind === 'residency' ? [report.request] : []));
  }

  /** Container reports so far. */
  containers(): ReportContainerStateRequest[] {
    return this.reports.flatMap((report) => (report.kind === 'container' ? [report.request] : []));
  }

  /** Resolves once a report satisfies `predicate` (past or future), or rejects after `timeoutMs`. */
  async waitFor(predicate: (report: Report) => boolean, timeoutMs = 10_000): Promise<Report> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.reports.find(predicate);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `no matching report within ${timeoutMs} ms; got ${JSON.stringify(this.reports.map((r) => r.kind))}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Stops serving. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  }
}

export { status };
