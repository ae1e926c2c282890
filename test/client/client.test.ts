/** The TypeScript client against a scripted ProxyService on a real grpc-js server (loopback). */
import { status as Status } from '@grpc/grpc-js';
import { expect } from 'chai';
import {
  CallCancelledError,
  ClusterUnavailableError,
  ProtocolError,
  ReadieClient,
  ReadieError,
  RemoteExecutionError,
  type RemoteLogLine,
} from '../../src/client/index.js';
import { PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import { FakeProxy, LogSource, TEST_CA_FILE, type ScriptedCall } from '../support/fake-proxy.js';
import { EXPECTED_ERRORS } from './expected-errors.js';
import { freePort } from '../support/e2e-cluster.js';

const MiB = 1024 * 1024;

const TRACEBACK =
  'Traceback (most recent call last):\n  File "<source>", line 2, in divide\nZeroDivisionError: division by zero\n';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

describe('TypeScript client', function () {
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
    proxy.calls.length = 0;
    proxy.failures.length = 0;
    proxy.script = async (call) => {
      await call.read();
      call.result({ ok: true, value: call.request() });
    };
    client = new ReadieClient({ address: proxy.address, insecure: true, env: {} });
  });
  afterEach(() => {
    client.close();
    expect(proxy.failures).to.deep.equal([]);
  });

  it('runs a plain call: config alone first, then the payload, then a half-close', async () => {
    const call = client.start(
      { module: 'numpy.linalg', function: 'norm', args: [[3, 4]], kwargs: { ord: 2 } },
      {
        memory: '2GiB',
        gpuMemory: 1024,
        checkpointId: 'ckpt-numpy',
        disableOptimizedExecution: true,
        packages: ['tqdm'],
        imports: ['scipy'],
      },
    );
    const value = await call.result;
    expect(value).to.deep.equal({
      module: 'numpy.linalg',
      source: null,
      function: 'norm',
      args: [[3, 4]],
      kwargs: { ord: 2 },
    });
    const [received] = proxy.calls;
    expect(received?.kinds).to.deep.equal(['config', 'chunk']);
    expect(received?.halfClosed).to.equal(true);
    expect(received?.config).to.deep.equal({
      requestId: call.requestId,
      sessionId: '',
      imports: ['numpy', 'scipy'],
      memory: 2 * 1024 ** 3,
      gpuMemory: 1024,
      gpu: false,
      disableOptimizedExecution: true,
      packages: ['tqdm'],
      checkpointId: 'ckpt-numpy',
      pythonVersion: '',
      format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
      pinned: false,
      retryOf: '',
      // A plain call, not a batch: both absent on the wire.
      inputs: undefined,
      maxInputs: undefined,
      // The call history shows the function by this name.
      function: 'numpy.linalg.norm',
      // No image declared: absent on the wire.
      image: undefined,
    });
    expect(call.requestId).to.match(/^req-[0-9a-f]{32}$/);
    expect(call.info).to.deep.equal({
      requestId: call.requestId,
      sessionId: '',
      workerId: 'worker-1',
      containerId: 'container-1',
      checkpointId: 'ckpt-numpy',
      servedVersion: '',
      routingRevision: 0,
      retryOf: '',
    });
    expect(received?.metadata.get('authorization')).to.deep.equal([]);
  });

  it('calls a function given as source, with hints from its imports', async () => {
    const source =
      'import numpy as np\nimport os\nfrom sklearn.linear_model import Ridge\n\ndef f(x):\n    return x\n';
    const value = await client.call<{ source: string }>({ source, function: 'f', args: [1] });
    expect(value.source).to.equal(source);
    expect(proxy.calls[0]?.config?.imports).to.deep.equal(['numpy', 'sklearn']);
  });

  it('surfaces a remote exception as RemoteExecutionError with its traceback', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.result({
        ok: false,
        error: {
          type: 'ZeroDivisionError',
          module: 'builtins',
          message: 'division by zero',
          traceback: TRACEBACK,
        },
      });
    };
    const error = await rejection(
      client.call({ source: 'def divide(a, b): return a / b', function: 'divide', args: [1, 0] }),
    );
    expect(error).to.be.instanceOf(RemoteExecutionError).and.instanceOf(ReadieError);
    const remote = error as RemoteExecutionError;
    expect(remote.remoteType).to.equal('ZeroDivisionError');
    expect(remote.remoteModule).to.equal('builtins');
    expect(remote.remoteMessage).to.equal('division by zero');
    expect(remote.traceback).to.equal(TRACEBACK);
    expect(remote.message).to.match(
      /^ZeroDivisionError: division by zero\n\nRemote traceback:\nTraceback/,
    );
    expect(remote.call?.containerId).to.equal('container-1');
    expect(remote.code).to.equal(undefined);
  });

  it('iterates log lines live, while the call runs', async () => {
    let seenFirst: () => void = () => undefined;
    const firstSeen = new Promise<void>((resolve) => (seenFirst = resolve));
    proxy.script = async (call) => {
      await call.read();
      call.log(LogSource.LOG_SOURCE_SYSTEM, 'restored ckpt-numpy');
      call.log(LogSource.LOG_SOURCE_STDOUT, 'step 1');
      // The call goes on only once the client has seen the lines: they arrive live.
      await firstSeen;
      call.log(LogSource.LOG_SOURCE_STDERR, 'step 2');
      call.result({ ok: true, value: 42 });
    };
    const viaCallback: string[] = [];
    const call = client.start<number>(
      { module: 'job', function: 'run' },
      { onLog: (line) => viaCallback.push(line.text) },
    );
    const lines: RemoteLogLine[] = [];
    for await (const line of call) {
      lines.push(line);
      if (line.text === 'step 1') seenFirst();
    }
    expect(await call.result).to.equal(42);
    expect(lines.map((line) => [line.source, line.text])).to.deep.equal([
      ['system', 'restored ckpt-numpy'],
      ['stdout', 'step 1'],
      ['stderr', 'step 2'],
    ]);
    expect(lines[0]?.call.checkpointId).to.equal('ckpt-numpy');
    expect(viaCallback).to.deep.equal(['restored ckpt-numpy', 'step 1', 'step 2']);
    // A second iteration after the end replays every line and ends.
    const replay: string[] = [];
    for await (const line of call.logs()) replay.push(line.text);
    expect(replay).to.have.length(3);
  });

  it('chunks a large payload and result: at most 1 MiB each, config never repeated', async () => {
    const big = 'x'.repeat(8 * MiB + 1);
    const answer = 'y'.repeat(3 * MiB + 5);
    proxy.script = async (call) => {
      await call.read();
      call.result({ ok: true, value: { length: call.payload.length, answer } });
    };
    const value = await client.call<{ length: number; answer: string }>({
      module: 'm',
      function: 'f',
      args: [big],
    });
    expect(value.answer).to.equal(answer);
    const received = proxy.calls[0] as ScriptedCall;
    expect(value.length).to.equal(received.payload.length);
    expect(received.request().args).to.deep.equal([big]);
    expect(received.kinds[0]).to.equal('config');
    expect(received.kinds.slice(1)).to.not.include('config');
    expect(received.chunkSizes.length).to.equal(Math.ceil(received.payload.length / MiB));
    expect(received.chunkSizes.slice(0, -1).every((size) => size === MiB)).to.equal(true);
    expect(Math.max(...received.chunkSizes)).to.be.at.most(MiB);
    expect(received.halfClosed).to.equal(true);
  });

  it('maps every status code to its error class', async () => {
    for (const [code, ErrorClass] of EXPECTED_ERRORS) {
      proxy.script = async (call) => {
        await call.read();
        call.log(LogSource.LOG_SOURCE_SYSTEM, 'about to fail');
        call.fail(code, `scripted ${Status[code]}`);
      };
      const error = await rejection(client.call({ module: 'm', function: 'f' }));
      expect(error, Status[code]).to.be.instanceOf(ErrorClass);
      const readie = error as ReadieError;
      expect(readie.code, Status[code]).to.equal(code);
      expect(readie.codeName).to.equal(Status[code]);
      expect(readie.details).to.equal(`scripted ${Status[code]}`);
      expect(readie.message).to.include(proxy.address).and.include(Status[code]);
      expect(readie.call?.workerId, Status[code]).to.equal('worker-1');
    }
  });

  it('reports a stream that ends without a result as a ProtocolError', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.end();
    };
    expect(await rejection(client.call({ module: 'm', function: 'f' }))).to.be.instanceOf(
      ProtocolError,
    );
  });

  it('cancels the server-side stream when the AbortSignal fires', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.log(LogSource.LOG_SOURCE_STDOUT, 'working');
      await call.cancelled;
    };
    const controller = new AbortController();
    const call = client.start({ module: 'm', function: 'forever' }, { signal: controller.signal });
    for await (const line of call) {
      if (line.text === 'working') controller.abort(new Error('user pressed stop'));
    }
    const error = await rejection(call.result);
    expect(error).to.be.instanceOf(CallCancelledError);
    expect((error as CallCancelledError).code).to.equal(Status.CANCELLED);
    expect((error as CallCancelledError).message).to.include('user pressed stop');
    expect((error as CallCancelledError).cause).to.be.instanceOf(Error);
    const received = await proxy.last();
    await received.cancelled; // the server saw the cancel (the test times out otherwise)
  });

  it('cancels with call.cancel() too, and never starts with an aborted signal', async () => {
    proxy.script = async (call) => {
      await call.read();
      await call.cancelled;
    };
    const call = client.start({ module: 'm', function: 'forever' });
    const received = await proxy.last();
    call.cancel();
    expect(await rejection(call.result)).to.be.instanceOf(CallCancelledError);
    await received.cancelled;

    const before = proxy.calls.length;
    const aborted = AbortSignal.abort('too late');
    const error = await rejection(client.call({ module: 'm', function: 'f' }, { signal: aborted }));
    expect(error).to.be.instanceOf(CallCancelledError);
    expect(proxy.calls.length).to.equal(before);
  });

  it('fails the call when its onLog callback throws', async () => {
    proxy.script = async (call) => {
      await call.read();
      call.log(LogSource.LOG_SOURCE_STDOUT, 'boom');
      await call.cancelled;
    };
    const failure = new Error('callback broke');
    const error = await rejection(
      client.call(
        { module: 'm', function: 'f' },
        {
          onLog: () => {
            throw failure;
          },
        },
      ),
    );
    expect(error).to.be.instanceOf(CallCancelledError);
    expect((error as CallCancelledError).cause).to.equal(failure);
  });

  it('carries the session ID on every call of a session', async () => {
    const session = client.session();
    await session.call({ module: 'm', function: 'f' });
    await session.call({ module: 'm', function: 'g' });
    await client.call({ module: 'm', function: 'h' });
    const resumed = client.session('ses-resumed');
    await resumed.call({ module: 'm', function: 'i' });
    expect(session.id).to.match(/^ses-[0-9a-f]{32}$/);
    expect(proxy.calls.map((call) => call.config?.sessionId)).to.deep.equal([
      session.id,
      session.id,
      '',
      'ses-resumed',
    ]);
    expect(session.lastCall?.sessionId).to.equal(session.id);
    expect(session.lastCall?.containerId).to.equal('container-1');
    const requestIds = new Set(proxy.calls.map((call) => call.config?.requestId));
    expect(requestIds.size).to.equal(4);
  });

  it('sends the token as bearer metadata', async () => {
    const withToken = new ReadieClient({
      address: proxy.address,
      insecure: true,
      token: 's3cret',
      env: {},
    });
    try {
      await withToken.call({ module: 'm', function: 'f' });
    } finally {
      withToken.close();
    }
    expect(proxy.calls[0]?.metadata.get('authorization')).to.deep.equal(['Bearer s3cret']);
  });

  it('reads address, plaintext flag and token from the environment', async () => {
    const fromEnv = new ReadieClient({
      env: { READIE_ADDRESS: proxy.address, READIE_INSECURE: '1', READIE_AUTH_TOKEN: 'env-token' },
    });
    try {
      await fromEnv.call({ module: 'm', function: 'f' });
    } finally {
      fromEnv.close();
    }
    expect(proxy.calls[0]?.metadata.get('authorization')).to.deep.equal(['Bearer env-token']);
  });

  it('says the cluster is unavailable when nothing listens', async () => {
    const nowhere = new ReadieClient({
      address: `127.0.0.1:${await freePort()}`,
      insecure: true,
      env: {},
    });
    try {
      const error = await rejection(nowhere.call({ module: 'm', function: 'f' }));
      expect(error).to.be.instanceOf(ClusterUnavailableError);
      expect((error as Error).message).to.include('READIE_ADDRESS');
    } finally {
      nowhere.close();
    }
  });

  describe('over TLS (the default)', () => {
    let tlsProxy: FakeProxy;
    // By name: Node deprecates TLS server names that are IP addresses.
    let address = '';
    before(async () => {
      tlsProxy = await FakeProxy.start({ tls: true });
      address = tlsProxy.address.replace('127.0.0.1', 'localhost');
    });
    after(async () => {
      await tlsProxy.stop();
    });

    it('verifies the router against the CA file', async () => {
      const secure = new ReadieClient({
        env: {
          READIE_ADDRESS: address,
          READIE_CA_FILE: TEST_CA_FILE,
          READIE_AUTH_TOKEN: 't',
        },
      });
      try {
        const value = await secure.call<{ function: string }>({ module: 'm', function: 'f' });
        expect(value.function).to.equal('f');
      } finally {
        secure.close();
      }
      expect(tlsProxy.calls.at(-1)?.metadata.get('authorization')).to.deep.equal(['Bearer t']);
    });

    it('refuses a server the system roots do not trust', async () => {
      const untrusting = new ReadieClient({ address, env: {} });
      try {
        const error = await rejection(untrusting.call({ module: 'm', function: 'f' }));
        expect(error).to.be.instanceOf(ClusterUnavailableError);
      } finally {
        untrusting.close();
      }
    });
  });
});
