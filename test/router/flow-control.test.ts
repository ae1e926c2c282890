import { expect } from 'chai';
import { connect, constants } from 'node:http2';
import { RequestExecutionRequest } from '../../src/proto/gen/readie/v1/proxy.js';
import { framed, FrameReader } from '../../src/router/wire/index.js';
import {
  callConfig,
  chunk,
  configMessage,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

const MiB = 1024 * 1024;

/** The router's relayed bytes to clients so far, from its metrics. */
async function bytesToClient(test: TestRouter): Promise<number> {
  const text = await (await fetch(`http://${test.router.metricsAddress}/metrics`)).text();
  const match = /^readie_router_relay_bytes_total\{direction="to_client"\} (\d+)$/m.exec(text);
  return Number(match?.[1] ?? 0);
}

describe('router: flow control end to end', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter({ metrics: '127.0.0.1:0' });
    worker = await ScriptedWorker.start({ workerId: 'w-flow' });
    await worker.connect(test.address).reportStatus();
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('a client that stops reading stops the worker: the router holds a few chunks, never the payload', async () => {
    // A plain HTTP/2 client with HTTP/2's default 64 KiB windows, reading nothing at first.
    const session = connect(`http://${test.address}`);
    try {
      const stream = session.request({
        [constants.HTTP2_HEADER_METHOD]: 'POST',
        [constants.HTTP2_HEADER_PATH]: '/readie.v1.ProxyService/RequestExecution',
        [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
        [constants.HTTP2_HEADER_TE]: 'trailers',
      });
      stream.pause();
      for (const message of [
        configMessage(callConfig({ requestId: 'r-slow-reader' })),
        chunk(`stream 64 ${MiB}`),
      ]) {
        stream.write(framed(RequestExecutionRequest.encode(message).finish()));
      }
      stream.end();
      for (let waited = 0; (await bytesToClient(test)) === 0; waited += 50) {
        if (waited > 15_000) expect.fail('the download never started');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const relayed = await bytesToClient(test);
      expect(relayed, 'bytes relayed while the client read nothing').to.be.below(12 * MiB);

      let received = 0;
      const reader = new FrameReader(8 * MiB);
      const trailers = new Promise<Record<string, unknown>>((resolve) =>
        stream.once('trailers', resolve),
      );
      stream.on('data', (piece: Buffer) =>
        reader.push(piece, (frame) => (received += frame.message.length)),
      );
      stream.resume();
      expect((await trailers)['grpc-status']).to.equal('0');
      expect(received).to.be.above(64 * MiB);
    } finally {
      session.destroy();
    }
  });
});
