import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, Metadata, Server, ServerCredentials } from '@grpc/grpc-js';
import { pino } from 'pino';
import { HealthImplementation } from 'grpc-health-check';
import { RegistryClient } from '../../src/worker/registry/index.js';
import { WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { startTestRouter, type TestRouter } from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs } from '../support/temp.js';

const TLS = join(ROOT, 'test', 'support', 'tls');
const CA = readFileSync(join(TLS, 'ca.pem'));
const CERT = readFileSync(join(TLS, 'server.pem'));
const KEY = readFileSync(join(TLS, 'server-key.pem'));

async function bareServer(tls: boolean): Promise<{ address: string; stop: () => void }> {
  const server = new Server();
  new HealthImplementation({ '': 'SERVING' }).addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      '127.0.0.1:0',
      tls
        ? ServerCredentials.createSsl(null, [{ cert_chain: CERT, private_key: KEY }])
        : ServerCredentials.createInsecure(),
      (error, bound) => (error ? reject(error) : resolve(bound)),
    ),
  );
  return { address: `localhost:${port}`, stop: () => server.forceShutdown() };
}

describe('TLS mismatches between router and workers, named with the setting to change', function () {
  this.timeout(60_000);
  let test: TestRouter | undefined;
  afterEach(async () => {
    await test?.close();
    test = undefined;
    cleanTempDirs();
  });

  it('a router without --worker-ca probing a TLS worker says to pass --worker-ca', async () => {
    test = await startTestRouter();
    const worker = await ScriptedWorker.start({ workerId: 'w-tls', tls: { cert: CERT, key: KEY } });
    try {
      await worker.connect(test.address).reportStatus();
      await test.router.probeNow();
      expect(test.router.state.workers.get('w-tls')?.probeFailures).to.equal(1);
      const problem = test.router.probeProblems.get('w-tls') ?? '';
      expect(problem).to.include(
        `worker w-tls at ${worker.address} speaks TLS but the router speaks plaintext: pass the router --worker-ca FILE`,
      );
    } finally {
      worker.stop();
    }
  });

  it('a router with --worker-ca probing a plaintext worker says which side to change', async () => {
    test = await startTestRouter({ workerCa: CA });
    const worker = await ScriptedWorker.start({ workerId: 'w-plain' });
    try {
      await worker
        .connect(test.address)
        .reportStatus({ address: worker.address.replace('127.0.0.1', 'localhost') });
      await test.router.probeNow();
      const problem = test.router.probeProblems.get('w-plain') ?? '';
      expect(problem).to.include('speaks plaintext but the router speaks TLS');
      expect(problem).to.include("the worker's --tls-cert/--tls-key");
    } finally {
      worker.stop();
    }
  });

  for (const [tls, expected] of [
    [true, 'the router at ADDRESS speaks plaintext but this worker speaks TLS'],
    [false, 'the router at ADDRESS speaks TLS but this worker speaks plaintext: drop --insecure'],
  ] as const) {
    it(`a worker dialing ${tls ? 'TLS to a plaintext' : 'plaintext to a TLS'} router says so when it gives up`, async () => {
      const router = await bareServer(!tls);
      const registry = new RegistryClient({
        router: router.address,
        credentials: tls ? credentials.createSsl(CA) : credentials.createInsecure(),
        dialsTls: tls,
        identity: { reportMetadata: () => new Metadata() },
        log: pino({ level: 'silent' }),
        registerRetries: 0,
        registerRetryDelayMs: 10,
        callTimeoutMs: 3_000,
      });
      try {
        let message = '';
        await registry
          .register({
            workerId: 'w1',
            address: 'w1:1',
            status: WorkerStatus.WORKER_STATUS_READY,
            error: '',
            flavor: 1,
            memoryTotal: 1,
            maxContainers: 1,
            gpuMemoryTotal: 0,
            checkpoints: [],
            pythonVersion: '3.11',
            restoreBackend: 'template',
            instanceId: 'i1',
            reportSeq: 1,
            containers: [],
          })
          .catch((error: Error) => (message = error.message));
        expect(message).to.include(expected.replace('ADDRESS', router.address));
      } finally {
        registry.close();
        router.stop();
      }
    });
  }
});
