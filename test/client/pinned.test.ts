/**
 * The TypeScript client's pinned calls against a scripted ProxyService on a real grpc-js server:
 * the flag on the wire, the served version and revision in the call's info, a shed's typed error
 * with its hint (retry-after-ms or google.rpc.RetryInfo), and the automatic retry with retryOf.
 */
import { Metadata, status as Status } from '@grpc/grpc-js';
import { expect } from 'chai';
import {
  ReadieClient,
  ResourceExhaustedError,
  ShedError,
  type CallInfo,
} from '../../src/client/index.js';
import { retryStatusDetails } from '../../src/core/calls/answer-trailers.js';
import { FakeProxy, type ScriptedCall } from '../support/fake-proxy.js';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

/** Shed trailers: the resolution, and the hint as `retry-after-ms` and/or a RetryInfo. */
function shedTrailers(hint: { ms?: string; retryInfoMs?: number }): Metadata {
  const metadata = new Metadata();
  metadata.set('readie-version', 'screen-v1');
  metadata.set('readie-routing-revision', '4');
  if (hint.ms !== undefined) metadata.set('retry-after-ms', hint.ms);
  if (hint.retryInfoMs !== undefined) {
    const details = retryStatusDetails({
      code: 'RESOURCE_EXHAUSTED',
      message: 'shed',
      retryAfterMs: hint.retryInfoMs,
    });
    metadata.set('grpc-status-details-bin', Buffer.from(details));
  }
  return metadata;
}

describe('TypeScript client: pinned calls', function () {
  this.timeout(30_000);
  let proxy: FakeProxy;
  let client: ReadieClient;
  const served = async (call: ScriptedCall) => {
    await call.read();
    call.result({ ok: true, value: 'judged' }, { version: 'screen-v1', routingRevision: 4 });
  };
  /** Sheds the first `times` calls with `hint`, then serves. */
  const shedding = (times: number, hint: { ms?: string; retryInfoMs?: number }) => {
    let sheds = 0;
    return async (call: ScriptedCall) => {
      if (sheds < times) {
        sheds += 1;
        await call.read();
        call.fail(Status.RESOURCE_EXHAUSTED, 'version loading: retry in 2s', shedTrailers(hint));
        return;
      }
      await served(call);
    };
  };

  before(async () => {
    proxy = await FakeProxy.start();
  });
  after(async () => {
    await proxy.stop();
  });
  beforeEach(() => {
    proxy.calls.length = 0;
    client = new ReadieClient({ address: proxy.address, insecure: true, env: {} });
  });
  afterEach(() => client.close());

  const judge = { module: 'screening', function: 'judge', args: ['text'] };

  it('sends pinned, and names the served version and revision from the answer IDs', async () => {
    proxy.script = served;
    const started = client.start(judge, { pinned: true });
    expect(await started.result).to.equal('judged');
    expect((await proxy.last()).config?.pinned).to.equal(true);
    expect((await proxy.last()).config?.retryOf).to.equal('');
    expect(started.info).to.deep.include({ servedVersion: 'screen-v1', routingRevision: 4 });
  });

  it('retries a shed after its hint with retryOf naming the first try, then resolves', async () => {
    proxy.script = shedding(2, { ms: '40' });
    const started = client.start(judge, { pinned: true });
    const t0 = Date.now();
    expect(await started.result).to.equal('judged');
    expect(Date.now() - t0).to.be.at.least(70);
    const [first, second, third] = proxy.calls.map((call) => call.config);
    expect(second?.retryOf).to.equal(first?.requestId);
    expect(third?.retryOf).to.equal(first?.requestId);
    expect(new Set([first?.requestId, second?.requestId, third?.requestId]).size).to.equal(3);
    const settled: CallInfo = started.info;
    expect(settled.retryOf).to.equal(first?.requestId);
    expect(settled.servedVersion).to.equal('screen-v1');
  });

  it('rejects with ShedError once the tries are spent, with retryAfterMs and the resolution', async () => {
    proxy.script = shedding(10, { ms: '30' });
    const error = await rejection(client.call(judge, { pinned: true, shedRetries: 1 }));
    expect(error).to.be.instanceOf(ShedError);
    expect(error).to.be.instanceOf(ResourceExhaustedError);
    const shed = error as ShedError;
    expect(shed.retryAfterMs).to.equal(30);
    expect(shed.retryAfter).to.equal(0.03);
    expect(shed.call).to.deep.include({ servedVersion: 'screen-v1', routingRevision: 4 });
    expect(proxy.calls).to.have.length(2);
  });

  it('reads the hint from a google.rpc.RetryInfo when there is no retry-after-ms', async () => {
    proxy.script = shedding(10, { retryInfoMs: 25 });
    const error = (await rejection(
      client.call(judge, { pinned: true, shedRetries: 0 }),
    )) as ShedError;
    expect(error.retryAfterMs).to.equal(25);
  });

  it('does not retry past its timeout, nor a RESOURCE_EXHAUSTED without a hint', async () => {
    proxy.script = shedding(10, { ms: '5000' });
    const t0 = Date.now();
    expect(await rejection(client.call(judge, { pinned: true, timeoutMs: 1000 }))).to.be.instanceOf(
      ShedError,
    );
    expect(Date.now() - t0).to.be.below(1000);
    expect(proxy.calls).to.have.length(1);
    proxy.calls.length = 0;
    proxy.script = shedding(10, {});
    const plain = await rejection(client.call(judge, { pinned: true }));
    expect(plain).to.be.instanceOf(ResourceExhaustedError);
    expect(plain).to.not.be.instanceOf(ShedError);
    expect(proxy.calls).to.have.length(1);
  });

  it('refuses bad retry options at once', () => {
    expect(() => client.start(judge, { shedRetries: -1 })).to.throw(RangeError, /shedRetries/);
    expect(() => client.start(judge, { timeoutMs: 0 })).to.throw(RangeError, /timeoutMs/);
  });
});
