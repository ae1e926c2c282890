import { expect } from 'chai';
import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { pino } from 'pino';
import {
  RegistryServiceService,
  ReportStatusRequest,
  WorkerStatus,
  type ReportStatusResponse,
} from '../../src/proto/gen/readie/v1/registry.js';
import { standbyRefusal } from '../../src/router/leadership/index.js';
import { RegistrationError, RegistryClient } from '../../src/worker/registry/index.js';

/**
 * A router's registry as a worker meets it: a standby (the product's own refusal, naming
 * `leader()` when that gives an address) until `leadsAfterMs`, then one that takes the report.
 * Counts what it was sent.
 */
async function registry(leadsAfterMs: number, leader: () => string | undefined = () => undefined) {
  const startedAt = Date.now();
  const seen = { refused: 0, accepted: 0 };
  const server = new Server();
  server.addService(RegistryServiceService, {
    reportStatus: (
      _call: ServerUnaryCall<ReportStatusRequest, ReportStatusResponse>,
      callback: sendUnaryData<ReportStatusResponse>,
    ) => {
      if (Date.now() - startedAt < leadsAfterMs) {
        seen.refused += 1;
        const refusal = standbyRefusal({ serving: () => false, leader });
        const trailers = new Metadata();
        for (const [key, value] of Object.entries(refusal.trailers)) trailers.set(key, value);
        callback({ code: status.UNAVAILABLE, details: refusal.details, metadata: trailers });
        return;
      }
      seen.accepted += 1;
      callback(null, {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { address: `127.0.0.1:${port}`, seen, stop: () => server.forceShutdown() };
}

function client(router: string, leaderWaitMs?: number): RegistryClient {
  return new RegistryClient({
    router,
    credentials: credentials.createInsecure(),
    identity: { reportMetadata: () => new Metadata() },
    log: pino({ level: 'silent' }),
    registerRetries: 1,
    registerRetryDelayMs: 100,
    callTimeoutMs: 3_000,
    ...(leaderWaitMs === undefined ? {} : { leaderWaitMs }),
  });
}

const REPORT = ReportStatusRequest.fromPartial({
  workerId: 'w1',
  address: 'w1:1',
  status: WorkerStatus.WORKER_STATUS_READY,
});

describe('registration while no router leads (routers electing a leader)', function () {
  this.timeout(30_000);

  it('waits while every router answers as a standby that knows no leader, then registers', async () => {
    // Both routers stand by for 1.5 s: more than the unreachable retries (one a router) last.
    const a = await registry(1_500);
    const b = await registry(1_500);
    const registering = client(`${a.address},${b.address}`);
    try {
      await registering.register(REPORT);
      expect(a.seen.refused + b.seen.refused, 'refusals waited out').to.be.greaterThan(4);
      expect(a.seen.accepted + b.seen.accepted).to.equal(1);
    } finally {
      a.stop();
      b.stop();
    }
  });

  it('waits while the standbys name a leader that stands by too (a lease left by an earlier run), then registers', async () => {
    // A restarted pair of routers reads the last run's lease: each names router b, which stands
    // by as well until the lease runs out. Longer than the unreachable retries last.
    const lease: { holder?: string } = {};
    const a = await registry(1_500, () => lease.holder);
    const b = await registry(1_500, () => lease.holder);
    lease.holder = b.address;
    const registering = client(`${a.address},${b.address}`);
    try {
      await registering.register(REPORT);
      expect(a.seen.refused + b.seen.refused, 'refusals waited out').to.be.greaterThan(4);
      expect(a.seen.accepted + b.seen.accepted).to.equal(1);
    } finally {
      a.stop();
      b.stop();
    }
  });

  it('gives up after leaderWaitMs, saying that no router led', async () => {
    const a = await registry(60_000);
    const started = Date.now();
    const failure = await client(a.address, 400)
      .register(REPORT)
      .then(
        () => null,
        (error: Error) => error,
      );
    try {
      expect(failure).to.be.instanceOf(RegistrationError);
      expect(failure!.message).to.match(/^no router led within 400 ms: 127\.0\.0\.1:\d+ answered/);
      expect(failure!.message).to.include('no router leads yet');
      expect(Date.now() - started).to.be.at.least(400);
    } finally {
      a.stop();
    }
  });
});
