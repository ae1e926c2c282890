import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { RequestExecutionRequest } from '../../src/proto/gen/readie/v1/proxy.js';
import {
  callConfig,
  codeOf,
  run,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { seededBytes, sendRaw } from '../support/raw-grpc.js';
import { cleanTempDirs } from '../support/temp.js';

const PROXY = '/readie.v1.ProxyService/RequestExecution';
/** A length-delimited field 1 that claims 255 bytes and has 1: never valid protobuf. */
const TRUNCATED = Buffer.from([0x0a, 0xff, 0x01]);
/** Field 1 with wire type 7, which does not exist: no decoder reads it (protobufjs clips truncations). */
const BAD_WIRE_TYPE = Buffer.from([0x0f]);

describe('router: messages that cannot be decoded', function () {
  this.timeout(120_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter();
    worker = await ScriptedWorker.start({ workerId: 'w-undecodable' });
    await worker.connect(test.address).reportStatus();
  });

  after(async () => {
    worker.stop();
    await test.close();
    cleanTempDirs();
  });

  it('answers 400 random and truncated first messages on ProxyService with INVALID_ARGUMENT, and keeps serving', async () => {
    const random = seededBytes(16);
    const config = Buffer.from(
      RequestExecutionRequest.encode({
        message: { $case: 'config', value: callConfig() },
      }).finish(),
    );
    const codes = new Map<number, number>();
    for (let index = 0; index < 400; index += 1) {
      const bytes =
        index % 2 === 0
          ? random(1 + (index % 97))
          : config.subarray(0, 1 + (index % (config.length - 1)));
      const outcome = await sendRaw(test.address, PROXY, [bytes], { stream: true });
      codes.set(outcome.code, (codes.get(outcome.code) ?? 0) + 1);
      if (outcome.code !== Number(status.INVALID_ARGUMENT)) {
        expect.fail(
          `message ${index} (${bytes.toString('hex')}): ${outcome.code} ${outcome.details}`,
        );
      }
    }
    expect([...codes.keys()]).to.deep.equal([status.INVALID_ARGUMENT]);
    expect(codeOf(await run(test.client, 'echo still here'))).to.equal('OK');
    expect(test.router.state.reservations.size).to.equal(0);
  });

  it('names what could not be read', async () => {
    const outcome = await sendRaw(test.address, PROXY, [TRUNCATED], { stream: true });
    expect(outcome.code).to.equal(status.INVALID_ARGUMENT);
    expect(outcome.details).to.match(
      /^could not decode the request message of \/readie\.v1\.ProxyService\/RequestExecution: .+ \(not valid protobuf/,
    );
  });

  it('refuses an undecodable payload chunk mid-call: INVALID_ARGUMENT, the call finished, the worker call cancelled', async () => {
    const config = Buffer.from(
      RequestExecutionRequest.encode({
        message: { $case: 'config', value: callConfig({ requestId: 'r-bad-chunk' }) },
      }).finish(),
    );
    const chunk = Buffer.from(
      RequestExecutionRequest.encode({
        message: { $case: 'chunk', value: { data: Buffer.from('hang') } },
      }).finish(),
    );
    const outcome = await sendRaw(
      test.address,
      PROXY,
      [config, chunk, Buffer.from([0x12, 0x05, 0x0a])],
      {
        stream: true,
      },
    );
    expect(outcome.code).to.equal(status.INVALID_ARGUMENT);
    expect(outcome.details).to.match(/could not decode/);
    expect(test.router.state.reservations.has('r-bad-chunk')).to.equal(false);
  });

  for (const path of [
    '/readie.v1.RegistryService/ReportStatus',
    '/readie.v1.RegistryService/ReportUtilization',
    '/readie.v1.RegistryService/ReportContainerState',
    '/readie.v1.AdminService/Status',
    '/readie.v1.TenantService/Slots',
    '/grpc.health.v1.Health/Check',
  ]) {
    it(`answers an undecodable request to ${path} with INVALID_ARGUMENT`, async () => {
      const outcome = await sendRaw(test.address, path, [BAD_WIRE_TYPE]);
      expect(outcome.code, outcome.details).to.equal(status.INVALID_ARGUMENT);
      expect(outcome.details).to.include(`could not decode the request message of ${path}`);
    });
  }
});
