import { expect } from 'chai';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { LogSource, PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import { pickleCall, unpickleEnvelope } from '../support/python.js';
import { cleanTempDirs } from '../support/temp.js';
import { sendRaw } from '../support/raw-grpc.js';
import { ExecuteRequest } from '../../src/proto/gen/readie/v1/execution.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const CLOUDPICKLE = PayloadFormat.PAYLOAD_FORMAT_CLOUDPICKLE;

describe('ExecutionService: calls', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('answers bytes it cannot decode with INVALID_ARGUMENT, first message or later, and health too', async () => {
    const address = `127.0.0.1:${harness.worker.port}`;
    const first = await sendRaw(
      address,
      '/readie.v1.ExecutionService/Execute',
      [Buffer.from([0x0f])],
      {
        stream: true,
      },
    );
    expect(first.code, first.details).to.equal(status.INVALID_ARGUMENT);
    expect(first.details).to.match(
      /could not decode the request message of \/readie\.v1\.ExecutionService\/Execute/,
    );
    const headerBytes = Buffer.from(
      ExecuteRequest.encode({ message: { $case: 'header', value: header({}) } }).finish(),
    );
    const later = await sendRaw(
      address,
      '/readie.v1.ExecutionService/Execute',
      [headerBytes, Buffer.from([0x12, 0x05, 0x0a])],
      { stream: true },
    );
    expect(later.code, later.details).to.equal(status.INVALID_ARGUMENT);
    expect(later.details).to.match(/could not decode/);
    const health = await sendRaw(address, '/grpc.health.v1.Health/Check', [Buffer.from([0x0f])]);
    expect(health.code).to.equal(status.INVALID_ARGUMENT);
  });

  it('runs a json-call and repeats the call IDs on every answer', async () => {
    const source = py`
      def add(a, b):
          print("adding", a, b)
          return a + b
    `;
    const result = await execute(
      harness.client,
      header({ ids: { requestId: 'req-plain', sessionId: '' } }),
      jsonCall(source, 'add', [2, 3]),
    );
    expect(envelopeOf(result)).to.deep.equal({ ok: true, value: 5 });
    expect(result.responses.length).to.be.at.least(2);
    for (const { response } of result.responses) {
      expect(response.ids).to.deep.include({
        requestId: 'req-plain',
        sessionId: '',
        workerId: harness.workerId,
        checkpointId: '',
      });
      expect(response.ids?.containerId).to.match(/^c-[0-9a-f]{10}$/);
    }
  });

  it('runs a cloudpickle call (fn, args, kwargs) and answers a pickled envelope', async () => {
    const payload = pickleCall('def mul(a, b):\n    return [a * b, "x"]\n', 'mul', [6, 7]);
    const result = await execute(harness.client, header({ format: CLOUDPICKLE }), payload);
    expect(result.code).to.equal(status.OK);
    expect(unpickleEnvelope(result.result)).to.deep.equal({ ok: true, value: "[42, 'x']" });
  });

  it('answers a user exception as an error envelope with the remote traceback (json-call)', async () => {
    const source = py`
      def explode(x):
          helper = lambda: int(x)
          return helper()
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'explode', ['nope']));
    const envelope = envelopeOf(result);
    expect(envelope.ok).to.equal(false);
    expect(envelope.error).to.include({ type: 'ValueError', module: 'builtins' });
    expect(envelope.error?.message).to.equal("invalid literal for int() with base 10: 'nope'");
    expect(envelope.error?.traceback).to.match(/^Traceback \(most recent call last\):/);
    expect(envelope.error?.traceback).to.include('line 3, in explode');
    expect(envelope.error?.traceback).to.include('return helper()');
    expect(envelope.error?.traceback).not.to.include('readie_executor');
  });

  it('answers a user exception with the exception object when it pickles (cloudpickle)', async () => {
    const source = py`
      class Custom(Exception):
          pass
      def fail():
          raise KeyError("missing")
    `;
    const result = await execute(
      harness.client,
      header({ format: CLOUDPICKLE }),
      pickleCall(source, 'fail'),
    );
    const envelope = unpickleEnvelope(result.result);
    expect(envelope.ok).to.equal(false);
    expect(envelope.error).to.include({
      type: 'KeyError',
      module: 'builtins',
      message: "'missing'",
    });
    expect(envelope.error?.traceback).to.match(/line 4, in fail\n/);
    expect(envelope.exceptionType).to.equal('KeyError');
  });

  it('turns a return value that is not JSON-serializable into a TypeError envelope', async () => {
    const source = 'def give():\n    return {1, 2}\n';
    const envelope = envelopeOf(
      await execute(harness.client, header({}), jsonCall(source, 'give')),
    );
    expect(envelope.ok).to.equal(false);
    expect(envelope.error?.type).to.equal('TypeError');
    expect(envelope.error?.message).to.match(/^the return value is not JSON-serializable: .*set/);
  });

  it('calls a function of an importable module (json-call "module")', async () => {
    const payload = Buffer.from(
      JSON.stringify({
        module: 'os.path',
        source: null,
        function: 'join',
        args: ['a', 'b'],
        kwargs: {},
      }),
    );
    expect(envelopeOf(await execute(harness.client, header({}), payload)).value).to.equal('a/b');
  });

  it('streams stdout and stderr lines while the function runs, not after', async () => {
    const source = py`
      import sys, time
      def progress():
          print("first")
          print("oops", file=sys.stderr)
          time.sleep(1.0)
          sys.stdout.write("second without newline")
          return "done"
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'progress'));
    expect(envelopeOf(result).value).to.equal('done');
    expect(logText(result, LogSource.LOG_SOURCE_STDOUT)).to.deep.equal([
      'first',
      'second without newline',
    ]);
    expect(logText(result, LogSource.LOG_SOURCE_STDERR)).to.deep.equal(['oops']);
    const first = result.logs.find((line) => line.text === 'first')!;
    const resultAt = result.responses.find(
      ({ response }) => response.message?.$case === 'chunk',
    )!.at;
    expect(
      resultAt - first.at,
      'the first line arrived while the call still ran',
    ).to.be.greaterThan(700);
  });

  it('captures output at the file-descriptor level (a child process writing to stdout)', async () => {
    const source = py`
      import subprocess
      def shell():
          subprocess.run(["echo", "from a child"], check=True)
          return 1
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'shell'));
    expect(logText(result, LogSource.LOG_SOURCE_STDOUT)).to.deep.equal(['from a child']);
  });

  it('keeps session state (module globals) across calls in one container', async () => {
    const source = py`
      def bump():
          global counter
          counter = globals().get("counter", 0) + 1
          return counter
    `;
    const first = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-json' } }),
      jsonCall(source, 'bump'),
    );
    expect(envelopeOf(first).value).to.equal(1);
    const containerId = first.ids!.containerId;
    const second = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-json', containerId } }),
      jsonCall(source, 'bump'),
    );
    expect(envelopeOf(second).value).to.equal(2);
    expect(second.ids?.containerId).to.equal(containerId);
  });

  it("keeps a pickled function's globals in the session (cloudpickle)", async () => {
    const source = py`
      total = 0
      def add(n):
          global total
          total += n
          return total
    `;
    const first = await execute(
      harness.client,
      header({ format: CLOUDPICKLE, ids: { sessionId: 'sess-pickle' } }),
      pickleCall(source, 'add', [5]),
    );
    expect(unpickleEnvelope(first.result).value).to.equal('5');
    const second = await execute(
      harness.client,
      header({
        format: CLOUDPICKLE,
        ids: { sessionId: 'sess-pickle', containerId: first.ids!.containerId },
      }),
      pickleCall(source, 'add', [7]),
    );
    expect(unpickleEnvelope(second.result).value).to.equal('12');
  });

  it('a session keeps its container after a user exception (a user exception is data)', async () => {
    const source = 'def boom():\n    raise RuntimeError("user error")\n';
    const first = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-exc' } }),
      jsonCall(source, 'boom'),
    );
    expect(envelopeOf(first).ok).to.equal(false);
    const again = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-exc', containerId: first.ids!.containerId } }),
      jsonCall('def ok():\n    return "still here"\n', 'ok'),
    );
    expect(envelopeOf(again).value).to.equal('still here');
  });

  it('streams payloads and results larger than 1 MiB in chunks of at most 1 MiB', async () => {
    const big = 'y'.repeat(3 * 1024 * 1024);
    const source = 'def echo(s):\n    return s + s[:10]\n';
    const result = await execute(harness.client, header({}), jsonCall(source, 'echo', [big]), {
      chunkSize: 256 * 1024,
    });
    const envelope = envelopeOf(result);
    expect((envelope.value as string).length).to.equal(big.length + 10);
    expect(result.chunkSizes.length).to.be.at.least(3);
    expect(Math.max(...result.chunkSizes)).to.be.at.most(1024 * 1024);
  });

  it("refuses a Python major.minor other than the sandbox's, naming both, before anything runs", async () => {
    // Creations only: an earlier test's container may still be reported removed meanwhile.
    const created = () =>
      harness.router
        .containers()
        .filter((report) => report.state === ContainerState.CONTAINER_STATE_BUSY).length;
    const containersBefore = created();
    const result = await execute(
      harness.client,
      header({ pythonVersion: '3.12.1' }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(result.code).to.equal(status.FAILED_PRECONDITION);
    expect(result.details).to.include('3.12.1').and.include(harness.worker.pythonVersion);
    expect(result.trailers).to.include({ 'readie-not-started': '1' });
    expect(created(), 'no container was created').to.equal(containersBefore);
  });

  it('accepts the same major.minor with another patch version', async () => {
    const [major, minor] = harness.worker.pythonVersion.split('.');
    const result = await execute(
      harness.client,
      header({ pythonVersion: `${major}.${minor}.99` }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(envelopeOf(result).value).to.equal(1);
  });

  it('refuses a stream whose first message is not a header, and a header without a format', async () => {
    const stream = harness.client.execute(new Metadata());
    const answered = new Promise<{ code: status; details: string }>((resolve) => {
      stream.on('error', (error: ServiceError) => resolve(error));
      stream.on('data', () => undefined);
    });
    stream.write({ message: { $case: 'chunk', value: { data: Buffer.from('{}') } } });
    stream.end();
    const notHeader = await answered;
    expect(notHeader.code).to.equal(status.INVALID_ARGUMENT);
    expect(notHeader.details).to.include('must be a CallHeader');

    const noFormat = await execute(
      harness.client,
      header({ format: PayloadFormat.PAYLOAD_FORMAT_UNSPECIFIED }),
      Buffer.from('{}'),
    );
    expect(noFormat.code).to.equal(status.INVALID_ARGUMENT);
    expect(noFormat.details).to.include('payload format');
  });

  it('refuses a call placed on another worker', async () => {
    const result = await execute(
      harness.client,
      header({ ids: { workerId: 'someone-else' } }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(result.code).to.equal(status.FAILED_PRECONDITION);
    expect(result.details).to.include('someone-else');
  });

  it('answers NOT_FOUND for a container it does not hold', async () => {
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 's', containerId: 'c-0000000000' } }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(result.code).to.equal(status.NOT_FOUND);
    expect(result.details).to.include('c-0000000000');
  });
});
