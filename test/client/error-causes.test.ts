import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Server, ServerCredentials, status as Status } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import {
  AuthenticationError,
  ClusterUnavailableError,
  NeverFitsError,
  ReadieClient,
  RemoteOutOfMemoryError,
  ResourceExhaustedError,
  ShedError,
  type ReadieError,
} from '../../src/client/index.js';
import { mayRetryRan, waitsForRoom } from '../../src/client/retry.js';
import { FakeProxy, TEST_CA_FILE } from '../support/fake-proxy.js';
import { ROOT } from '../support/replay.js';
import { nginxConfig } from '../support/e2e-cluster.js';
import { PYTHON } from '../support/python.js';
import { startTestRouter } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { startTcpCut } from '../support/tcp-cut.js';
import { freePort } from '../support/e2e-cluster.js';

const TLS = join(ROOT, 'test', 'support', 'tls');

async function failure(client: ReadieClient): Promise<ReadieError> {
  try {
    await client.call({ module: 'm', function: 'f' });
  } catch (error) {
    return error as ReadieError;
  }
  throw new Error('expected the call to fail');
}

/** Resolves once something accepts connections on loopback `port`. */
async function untilListening(port: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A gRPC server with nothing but health, plaintext or TLS: a port for the client to mis-dial. */
async function bareServer(tls: boolean): Promise<{ address: string; stop: () => void }> {
  const server = new Server();
  new HealthImplementation({ '': 'SERVING' }).addToServer(server);
  const credentials = tls
    ? ServerCredentials.createSsl(null, [
        {
          cert_chain: readFileSync(join(TLS, 'server.pem')),
          private_key: readFileSync(join(TLS, 'server-key.pem')),
        },
      ])
    : ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { address: `localhost:${port}`, stop: () => server.forceShutdown() };
}

describe('TypeScript client: one hint per cause', function () {
  this.timeout(30_000);
  let proxy: FakeProxy;
  let client: ReadieClient;
  before(async () => {
    proxy = await FakeProxy.start();
  });
  after(async () => {
    await proxy.stop();
  });
  beforeEach(() => {
    client = new ReadieClient({ address: proxy.address, insecure: true, env: {} });
  });
  afterEach(() => client.close());

  it('an out-of-memory kill is RemoteOutOfMemoryError with its budget, never a router hint', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(
        Status.RESOURCE_EXHAUSTED,
        'worker w1: the call ran out of memory: it was killed when it exceeded its memory budget of 512MiB',
        { 'readie-killed': 'out-of-memory', 'readie-memory-budget': String(512 * 1024 ** 2) },
      );
    };
    const error = await failure(client);
    expect(error).to.be.instanceOf(RemoteOutOfMemoryError);
    expect(error).to.not.be.instanceOf(ResourceExhaustedError);
    expect((error as RemoteOutOfMemoryError).memoryBudget).to.equal(512 * 1024 ** 2);
    expect(error.message).to.match(/^the call ran out of memory at /);
    expect(error.message).to.include('memory budget of 512MiB: ask for more');
    expect(error.message).to.not.include('READIE_ADDRESS');
    expect(error.notStarted).to.equal(false);
  });

  it('a call that reached a worker gets a worker hint, with the retry advice its trailers allow', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(Status.UNAVAILABLE, 'worker w1: the executor was killed by SIGSEGV');
    };
    const ran = await failure(client);
    expect(ran).to.be.instanceOf(ClusterUnavailableError);
    expect(ran.message).to.include('placed the call on worker w1').and.include('may have run');
    expect(ran.message).to.not.include('READIE_ADDRESS');
    expect(ran.notStarted).to.equal(false);
    proxy.script = async (call) => {
      await call.read();
      call.fail(Status.UNAVAILABLE, 'worker w1: No connection established. Last error: ...', {
        'readie-not-started': '1',
      });
    };
    const never = await failure(client);
    expect(never.notStarted).to.equal(true);
    expect(never.message).to.include('never started, so the call can be retried');
  });

  it('no workers: the router runs, the operator must look at its workers', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(Status.UNAVAILABLE, 'no workers available', { 'readie-not-started': '1' });
    };
    const error = await failure(client);
    expect(error.message).to.include('has no worker').and.include('readie status');
    expect(error.message).to.not.include('READIE_ADDRESS');
    expect(error.notStarted).to.equal(true);
  });

  it('a shed (RESOURCE_EXHAUSTED with retry-after-ms) is a ShedError with its own hint, not a full fleet', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(
        Status.RESOURCE_EXHAUSTED,
        'version "v1" is not resident on its subset ...: retry in 2s (ROUTING_RETRY_AFTER)',
        { 'retry-after-ms': '1500', 'readie-version': 'v1', 'readie-routing-revision': '3' },
      );
    };
    const error = await failure(client);
    expect(error).to.be.instanceOf(ShedError).and.instanceOf(ResourceExhaustedError);
    expect((error as ShedError).retryAfterMs).to.equal(1500);
    expect(error.message).to.match(/^the call was shed at /);
    expect(error.message).to.include('retry after 1500ms');
    expect(error.message).to.not.include('ask for less memory');
    expect(error.notStarted).to.equal(true);
    expect(error.call?.servedVersion).to.equal('v1');
  });

  it('a call that never fits (readie-never-fits) is a final NeverFitsError: no wait cures it', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(
        Status.RESOURCE_EXHAUSTED,
        'no worker can ever accept this request: the largest worker offers 10.80GiB of memory; this call asks 100GiB',
        { 'readie-not-started': '1', 'readie-never-fits': '1' },
      );
    };
    const error = await failure(client);
    expect(error).to.be.instanceOf(NeverFitsError).and.instanceOf(ResourceExhaustedError);
    expect(error.message).to.match(/^the call can never fit at /);
    expect(error.message).to.include('the client does not retry it');
    expect(error.notStarted).to.equal(true);
    expect(waitsForRoom(error)).to.equal(false);
    expect(mayRetryRan(error)).to.equal(false);
  });

  it('a call that waited QUEUE_TIMEOUT in the admission queue (readie-queued) is not retried; "no room" without it is', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.fail(
        Status.RESOURCE_EXHAUSTED,
        'queued for 10m: no worker can accept this request (1 candidate: container-count ruled out 1) (QUEUE_TIMEOUT)',
        { 'readie-not-started': '1', 'readie-queued': '1' },
      );
    };
    const waited = await failure(client);
    expect(waited).to.be.instanceOf(ResourceExhaustedError);
    expect(waited.notStarted).to.equal(true);
    expect(waited.queueTimedOut).to.equal(true);
    expect(waitsForRoom(waited)).to.equal(false);
    // A router that does not queue (QUEUE_TIMEOUT=0) refuses "no room" at once: waited out.
    proxy.script = async (call) => {
      await call.read();
      call.fail(Status.RESOURCE_EXHAUSTED, 'no worker can accept this request (...)', {
        'readie-not-started': '1',
      });
    };
    const refused = await failure(client);
    expect(refused.queueTimedOut).to.equal(false);
    expect(waitsForRoom(refused)).to.equal(true);
  });

  it('nothing listening: names the address and READIE_ADDRESS', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const nowhere = new ReadieClient({ address, insecure: true, env: {} });
    try {
      const error = await failure(nowhere);
      expect(error).to.be.instanceOf(ClusterUnavailableError);
      expect(error.message).to.include(`nothing listens at ${address}: check READIE_ADDRESS`);
      // Nothing reached a router: the function never started.
      expect(error.notStarted).to.equal(true);
    } finally {
      nowhere.close();
    }
  });

  it('a router that dies mid-call: the connection was lost, the call may have run, not a TLS hint', async () => {
    const relay = await startTcpCut('127.0.0.1', Number(proxy.address.split(':')[1]));
    const relayed = new ReadieClient({ address: relay.address, insecure: true, env: {} });
    proxy.script = async (call) => {
      void call.read().catch(() => undefined);
      await call.started;
      relay.drop();
      await call.cancelled;
    };
    try {
      const error = await failure(relayed);
      expect(error).to.be.instanceOf(ClusterUnavailableError);
      expect(error.message).to.include(
        `the connection to the router (or nginx) at ${relay.address} was lost during the call`,
      );
      expect(error.message).to.include('retry only if running it twice is safe');
      expect(error.message).to.not.include('READIE_INSECURE');
      expect(error.notStarted).to.equal(false);
    } finally {
      relayed.close();
      await relay.close();
    }
  });

  it('the router asks for a token: the hint to set READIE_AUTH_TOKEN is said once', async () => {
    const router = await startTestRouter({
      auth: { mode: 'single-token', token: 'a-development-token-0123456789' },
    });
    const tokenless = new ReadieClient({ address: router.address, insecure: true, env: {} });
    try {
      const error = await failure(tokenless);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.message.split('READIE_AUTH_TOKEN')).to.have.length(2);
      expect(error.notStarted).to.equal(true);
    } finally {
      tokenless.close();
      await router.close();
    }
  });

  it('nginx whose router is not answering (502): both clients say the router behind nginx does not answer', async () => {
    const dir = tempDir('readie-nginx-502-');
    const port = await freePort();
    const conf = join(dir, 'nginx.conf');
    // deploy/nginx.conf, its upstream a port where nothing listens.
    writeFileSync(conf, nginxConfig(dir, port, await freePort()));
    const nginx = spawn('nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: 'ignore' });
    const address = `127.0.0.1:${port}`;
    const client = new ReadieClient({ address, env: { READIE_CA_FILE: TEST_CA_FILE } });
    try {
      await untilListening(port);
      const error = await failure(client);
      const words = `nginx (or another proxy) at ${address} answered HTTP 502: the router behind it is not answering`;
      expect(error).to.be.instanceOf(ClusterUnavailableError);
      expect(error.message).to.include(words);
      const python = spawnSync(
        PYTHON,
        [
          '-c',
          'import readie\ntry:\n    readie.remote(lambda: 1)()\nexcept readie.ClusterUnavailableError as error:\n    print(error)\n',
        ],
        {
          encoding: 'utf8',
          env: {
            PYTHONPATH: join(ROOT, 'python'),
            READIE_ADDRESS: address,
            READIE_CA_FILE: TEST_CA_FILE,
          },
          timeout: 60_000,
        },
      );
      expect(python.stdout, python.stderr).to.include(words);
    } finally {
      client.close();
      nginx.kill('SIGTERM');
      cleanTempDirs();
    }
  });

  it('TLS against a plaintext server: says who speaks what and to set READIE_INSECURE', async () => {
    const plain = await bareServer(false);
    const tlsClient = new ReadieClient({
      address: plain.address,
      env: { READIE_CA_FILE: TEST_CA_FILE },
    });
    try {
      const error = await failure(tlsClient);
      expect(error.message).to.include(
        `the router (or nginx) at ${plain.address} speaks plaintext but this client speaks TLS`,
      );
      expect(error.message).to.include('READIE_INSECURE=1');
    } finally {
      tlsClient.close();
      plain.stop();
    }
  });

  it('plaintext against a TLS server: found by a probe, says to unset READIE_INSECURE', async () => {
    const secure = await bareServer(true);
    const plainClient = new ReadieClient({ address: secure.address, insecure: true, env: {} });
    try {
      const error = await failure(plainClient);
      expect(error.message).to.include(
        `the router (or nginx) at ${secure.address} speaks TLS but this client speaks plaintext: unset READIE_INSECURE`,
      );
      expect(error.message).to.include('READIE_CA_FILE');
    } finally {
      plainClient.close();
      secure.stop();
    }
  });

  it('a certificate the client does not trust: says to set READIE_CA_FILE', async () => {
    const secure = await bareServer(true);
    const untrusting = new ReadieClient({ address: secure.address, env: {} });
    try {
      const error = await failure(untrusting);
      expect(error.message).to.include('does not trust: set READIE_CA_FILE');
    } finally {
      untrusting.close();
      secure.stop();
    }
  });
});
