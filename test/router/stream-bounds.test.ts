import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { constants, type ClientHttp2Session } from 'node:http2';
import { connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { RequestExecutionRequest } from '../../src/proto/gen/readie/v1/proxy.js';
import {
  bearer,
  callConfig,
  chunk,
  codeOf,
  configMessage,
  eventually,
  readLog,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import {
  messagePrefix,
  openRawCall,
  rawSession,
  roundTrip,
  sendPartialMessage,
  within,
  type RawCall,
} from '../support/router/raw-h2-calls.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const MiB = 1024 * 1024;
const TENANT_A = 'token-of-tenant-a-0001';
const TENANT_B = 'token-of-tenant-b-0002';
const WORKER = 'token-of-worker-w1-0003';

/** A whole message of `request`, framed. */
function framedRequest(request: RequestExecutionRequest): Buffer {
  const message = Buffer.from(RequestExecutionRequest.encode(request).finish());
  return Buffer.concat([messagePrefix(message.length), message]);
}

describe('router: what a client can make it hold on the call path is bounded', function () {
  this.timeout(20_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  const sessions: ClientHttp2Session[] = [];
  const session = (): ClientHttp2Session => {
    const opened = rawSession(test.address);
    sessions.push(opened);
    return opened;
  };

  before(async () => {
    const dir = tempDir('readie-stream-bounds-');
    writeFileSync(
      join(dir, 'tokens'),
      `tenant tenant-a ${TENANT_A}\ntenant tenant-b ${TENANT_B}\nworker w1 ${WORKER}\n`,
      { mode: 0o600 },
    );
    test = await startTestRouter({
      auth: { mode: 'tokens', tokensFile: join(dir, 'tokens'), routerTokenFile: null },
      config: {
        FIRST_MESSAGE_TIMEOUT: 400,
        STREAM_IDLE_TIMEOUT: 500,
        CONNECTION_IDLE_TIMEOUT: 700,
        CONNECTION_MAX_STREAMS: 3,
        TENANT_MAX_STREAMS: 5,
        CONNECTION_MAX_BUFFERED: 2 * MiB,
        TENANT_MAX_BUFFERED: 3 * MiB,
      },
    });
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address, { token: WORKER }).reportStatus();
  });

  afterEach(async () => {
    for (const opened of sessions.splice(0)) opened.destroy();
    await eventually(() => test.router.state.reservations.size === 0, 'no reservation left');
    // Every slot and byte came back: both tenants are served as before.
    expect(codeOf(await run(test.client, 'echo a', {}, { metadata: bearer(TENANT_A) }))).to.equal(
      'OK',
    );
    expect(codeOf(await run(test.client, 'echo b', {}, { metadata: bearer(TENANT_B) }))).to.equal(
      'OK',
    );
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('ends a first message that never completes with DEADLINE_EXCEEDED after FIRST_MESSAGE_TIMEOUT', async () => {
    const started = Date.now();
    const call = openRawCall(session(), TENANT_A);
    void sendPartialMessage(call.stream, MiB - 64, 0.5 * MiB);
    const outcome = await within(call.status, 5_000, 'no status');
    expect(outcome).to.deep.include({ code: status.DEADLINE_EXCEEDED });
    expect((outcome as { details: string }).details).to.match(/FIRST_MESSAGE_TIMEOUT/);
    expect(Date.now() - started).to.be.at.least(350);
  });

  it('ends a slowloris first message (a byte at a time) at the same deadline', async () => {
    const call = openRawCall(session(), TENANT_A);
    call.stream.write(messagePrefix(1_000));
    const drip = setInterval(() => call.stream.write(Buffer.from('a')), 50);
    try {
      const outcome = await within(call.status, 5_000, 'no status');
      expect(outcome).to.deep.include({ code: status.DEADLINE_EXCEEDED });
    } finally {
      clearInterval(drip);
    }
  });

  it('ends a call whose client goes quiet before ending its request after STREAM_IDLE_TIMEOUT, finishing it', async () => {
    const config = callConfig({ requestId: 'r-quiet' });
    const call = openRawCall(session(), TENANT_A);
    call.stream.write(
      Buffer.concat([framedRequest(configMessage(config)), framedRequest(chunk('echo x'))]),
    );
    const outcome = await within(call.status, 5_000, 'no status');
    expect(outcome).to.deep.include({ code: status.DEADLINE_EXCEEDED });
    expect((outcome as { details: string }).details).to.match(/STREAM_IDLE_TIMEOUT/);
    await eventually(
      () =>
        readLog(test.logDir).some(
          (e) =>
            e.type === 'CallFinished' &&
            e.requestId === 'r-quiet' &&
            e.code === 'DEADLINE_EXCEEDED',
        ),
      'the quiet call finished in the log, DEADLINE_EXCEEDED',
    );
  });

  it('refuses a call stream past CONNECTION_MAX_STREAMS with RESOURCE_EXHAUSTED, and takes one once a slot frees', async () => {
    const connection = session();
    const held: RawCall[] = [0, 1, 2].map(() => openRawCall(connection, TENANT_A));
    for (const call of held) call.stream.write(messagePrefix(100));
    const extra = openRawCall(connection, TENANT_A);
    const refused = await within(extra.status, 2_000, 'no status');
    expect(refused).to.deep.include({ code: status.RESOURCE_EXHAUSTED });
    expect((refused as { details: string }).details).to.match(/CONNECTION_MAX_STREAMS 3/);
    held[0]!.stream.close();
    await held[0]!.status;
    // The freed slot takes a whole call on the same connection.
    const next = openRawCall(connection, TENANT_A);
    next.stream.end(
      Buffer.concat([
        framedRequest(configMessage(callConfig())),
        framedRequest(chunk('echo again')),
      ]),
    );
    expect(await within(next.status, 5_000, 'no status')).to.deep.include({ code: status.OK });
  });

  it('refuses a call stream past TENANT_MAX_STREAMS over all connections, naming the tenant; other tenants go on', async () => {
    const [first, second] = [session(), session()];
    const held = [
      ...[0, 1, 2].map(() => openRawCall(first, TENANT_A)),
      ...[0, 1].map(() => openRawCall(second, TENANT_A)),
    ];
    for (const call of held) call.stream.write(messagePrefix(100));
    // The router has read every stream's headers before the next one opens elsewhere.
    await Promise.all([roundTrip(first), roundTrip(second)]);
    const extra = openRawCall(session(), TENANT_A);
    const refused = await within(extra.status, 2_000, 'no status');
    expect(refused).to.deep.include({ code: status.RESOURCE_EXHAUSTED });
    expect((refused as { details: string }).details).to.match(
      /tenant tenant-a .*TENANT_MAX_STREAMS 5/,
    );
    expect(codeOf(await run(test.client, 'echo b', {}, { metadata: bearer(TENANT_B) }))).to.equal(
      'OK',
    );
  });

  it('ends the stream whose half-received bytes would pass CONNECTION_MAX_BUFFERED or TENANT_MAX_BUFFERED, and gives bytes back when a stream ends', async () => {
    const [first, second] = [session(), session()];
    // Each partial message is read by the router before the next is sent.
    const partial = async (connection: ClientHttp2Session, sent: number): Promise<RawCall> => {
      const call = openRawCall(connection, TENANT_A);
      await sendPartialMessage(call.stream, MiB - 64, sent);
      await roundTrip(connection);
      return call;
    };
    // The first connection holds 1.8 MiB; 0.5 MiB more would pass its 2 MiB.
    const a1 = await partial(first, 0.9 * MiB);
    await partial(first, 0.9 * MiB);
    const a3 = await partial(first, 0.5 * MiB);
    const overConnection = await within(a3.status, 2_000, 'no status');
    expect(overConnection).to.deep.include({ code: status.RESOURCE_EXHAUSTED });
    expect((overConnection as { details: string }).details).to.match(/CONNECTION_MAX_BUFFERED/);

    // The tenant holds 2.7 MiB over both; 0.5 MiB more would pass its 3 MiB.
    await partial(second, 0.9 * MiB);
    const b2 = await partial(second, 0.5 * MiB);
    const overTenant = await within(b2.status, 2_000, 'no status');
    expect(overTenant).to.deep.include({ code: status.RESOURCE_EXHAUSTED });
    expect((overTenant as { details: string }).details).to.match(/TENANT_MAX_BUFFERED/);

    // a1 leaves: its 0.9 MiB come back to the tenant, so 0.75 MiB more fits and reads on to the
    // message's end.
    a1.stream.close();
    await a1.status;
    const b3 = openRawCall(second, TENANT_A);
    const length = 0.75 * MiB + 100;
    await sendPartialMessage(b3.stream, length, 0.75 * MiB);
    b3.stream.end(Buffer.alloc(100, 0xff));
    const read = await within(b3.status, 2_000, 'no status');
    // Read whole, it is judged as a message (undecodable), not refused for its bytes.
    expect(read).to.deep.include({ code: status.INVALID_ARGUMENT });
  });

  it('refuses a first message over 1 MiB from its prefix: a config is never that big', async () => {
    const call = openRawCall(session(), TENANT_A);
    call.stream.write(messagePrefix(MiB + 1));
    const outcome = await within(call.status, 2_000, 'no status');
    expect(outcome).to.deep.include({ code: status.RESOURCE_EXHAUSTED });
    expect((outcome as { details: string }).details).to.match(/first message .* at most 1048576/);
  });

  it('resets a request to another service (health, open to all) that has not arrived whole within FIRST_MESSAGE_TIMEOUT', async () => {
    const stream = session().request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Check',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    stream.on('data', () => undefined);
    await sendPartialMessage(stream, 4 * MiB - 64, MiB);
    const reset = new Promise<number>((resolve) =>
      stream.once('close', () => resolve(stream.rstCode ?? -1)),
    );
    expect(await within(reset, 5_000, 'still open')).to.equal(constants.NGHTTP2_CANCEL);
  });

  it('resets a stream the router answered once its client has not ended it within STREAM_IDLE_TIMEOUT', async () => {
    const connection = session();
    const refused = openRawCall(connection, 'not-a-token-of-anyone-at-all');
    expect((await refused.status).code).to.equal(status.UNAUTHENTICATED);
    // The client never ends its side: the stream would stay open, and keep the connection busy.
    const closed = new Promise<number>((resolve) =>
      refused.stream.once('close', () => resolve(refused.stream.rstCode ?? -1)),
    );
    expect(await within(closed, 5_000, 'still open')).to.equal(0);
  });

  it('closes a TCP connection that never speaks, and an HTTP/2 connection with no stream, after CONNECTION_IDLE_TIMEOUT', async () => {
    const [host, port] = [
      test.address.slice(0, test.address.lastIndexOf(':')),
      Number(test.address.slice(test.address.lastIndexOf(':') + 1)),
    ];
    const started = Date.now();
    const socket = tcpConnect({ host, port });
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    const tcpClosed = new Promise<number>((resolve) =>
      socket.once('close', () => resolve(Date.now() - started)),
    );
    const h2 = session();
    const h2Closed = new Promise<number>((resolve) =>
      h2.once('close', () => resolve(Date.now() - started)),
    );
    // One call, then nothing: the connection is idle from the call's end.
    const call = openRawCall(h2, TENANT_A);
    call.stream.end(
      Buffer.concat([framedRequest(configMessage(callConfig())), framedRequest(chunk('echo x'))]),
    );
    expect(await call.status).to.deep.include({ code: status.OK });
    const [tcpAfter, h2After] = await Promise.all([
      within(tcpClosed, 8_000, Infinity),
      within(h2Closed, 8_000, Infinity),
    ]);
    expect(tcpAfter).to.be.within(600, 8_000);
    expect(h2After).to.be.within(600, 8_000);
  });
});
