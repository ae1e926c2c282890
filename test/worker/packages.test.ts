import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { buildWheel } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
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

const USE = py`
  def use():
      import readie_greeting
      return [readie_greeting.greet("sandbox"), readie_greeting.__file__]
`;

describe('package installs', function () {
  this.timeout(90_000);
  let harness: Harness;
  before(async () => {
    const wheels = buildWheel(
      tempDir('rw-wheels-'),
      'readie_greeting',
      'def greet(who):\n    return f"hello {who}"\n',
    );
    harness = await startHarness({ flags: { wheelDir: wheels } });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it("installs requested packages from a local wheel directory before the call, streaming the installer's output", async () => {
    const result = await execute(
      harness.client,
      header({ packages: ['readie_greeting==1.0'] }),
      jsonCall(USE, 'use'),
    );
    const [greeting, file] = envelopeOf(result).value as [string, string];
    expect(greeting).to.equal('hello sandbox');
    expect(file).to.match(/^\/tmp\/\.readie\/packages\//);
    const system = logText(result, LogSource.LOG_SOURCE_SYSTEM);
    expect(system[0]).to.equal('installing readie_greeting==1.0 with pip');
    expect(system.join('\n')).to.include('Successfully installed readie_greeting-1.0');
    const firstChunk = result.responses.findIndex(
      ({ response }) => response.message?.$case === 'chunk',
    );
    const lastSystem = result.responses.findLastIndex(
      ({ response }) =>
        response.message?.$case === 'log' &&
        response.message.value.source === LogSource.LOG_SOURCE_SYSTEM,
    );
    expect(lastSystem).to.be.lessThan(firstChunk);
  });

  it('a package is not visible to containers that did not install it', async () => {
    const result = await execute(harness.client, header({}), jsonCall(USE, 'use'));
    const envelope = envelopeOf(result);
    expect(envelope.ok).to.equal(false);
    expect(envelope.error?.type).to.equal('ModuleNotFoundError');
  });

  it("a failed install ends the call with FAILED_PRECONDITION and leaves the session's container usable", async () => {
    const failed = await execute(
      harness.client,
      header({ packages: ['readie-not-a-real-package'], ids: { sessionId: 'sess-install' } }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(failed.code).to.equal(status.FAILED_PRECONDITION);
    expect(failed.details).to.include('installing readie-not-a-real-package failed');
    // The install comes before the function: the call never started.
    expect(failed.trailers).to.include({ 'readie-not-started': '1' });
    expect(logText(failed, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.match(
      /No matching distribution|Could not find a version/,
    );
    const containerId = failed.ids!.containerId;
    expect(containerId).to.match(/^c-/);
    const reused = await execute(
      harness.client,
      header({ packages: ['readie_greeting'], ids: { sessionId: 'sess-install', containerId } }),
      jsonCall(USE, 'use'),
    );
    expect(reused.ids?.containerId).to.equal(containerId);
    expect((envelopeOf(reused).value as string[])[0]).to.equal('hello sandbox');
  });

  it('refuses a requirement that looks like an installer option', async () => {
    const result = await execute(
      harness.client,
      header({ packages: ['--index-url=http://evil.example/simple'] }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(result.code).to.equal(status.INVALID_ARGUMENT);
    expect(result.details).to.include('looks like an installer option');
  });
});
