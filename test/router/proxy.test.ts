import { expect } from 'chai';
import type { Catalogue, ClusterEvent } from '../../src/events/index.js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { catalogueRevision } from '../../src/router/startup/index.js';
import {
  codeOf,
  eventually,
  foldLog,
  readLog,
  run,
  startTestRouter,
  storyOf,
  systemLines,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy'],
      checkpoints: [{ id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 }],
    },
  },
  importCosts: { numpy: 150 },
  defaultImportCost: 100,
};

describe('router: ProxyService.RequestExecution over loopback', function () {
  this.timeout(60_000);
  let test: TestRouter;
  let worker: ScriptedWorker;

  before(async () => {
    test = await startTestRouter({
      catalogue: { catalogue: CATALOGUE, revision: catalogueRevision(CATALOGUE) },
      config: { EXECUTION_TIMEOUT: 1_500 },
    });
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address).reportStatus();
  });

  /** Closes the router, reads its log from disk, and starts it again on that log. */
  async function logOnDisk(): Promise<ClusterEvent[]> {
    await test.close();
    const events = readLog(test.logDir);
    test = await startTestRouter({ logDir: test.logDir, config: { EXECUTION_TIMEOUT: 1_500 } });
    await worker.connect(test.address).reportStatus();
    return events;
  }

  afterEach(async () => {
    await eventually(() => test.router.state.reservations.size === 0, 'no reservation left');
  });

  after(async () => {
    worker.stop();
    await test.close();
    const state = foldLog(test.logDir);
    expect(state.reservations.size, 'no reservation in the log').to.equal(0);
    cleanTempDirs();
  });

  it('relays a call to the worker and back with every ID, and logs its story', async () => {
    const outcome = await run(test.client, 'echo hello', {
      requestId: 'r-echo',
      imports: ['numpy'],
      memory: 1024,
    });
    expect(codeOf(outcome)).to.equal('OK');
    expect(outcome.payload).to.equal('echo hello');
    expect(outcome.ids.at(-1)).to.deep.equal({
      requestId: 'r-echo',
      sessionId: '',
      workerId: 'w1',
      containerId: worker.calls.at(-1)?.containerId,
      checkpointId: 'ckpt-numpy',
      version: '',
      routingRevision: 0,
    });
    const header = worker.calls.at(-1)?.header;
    expect(header?.ids?.checkpointId).to.equal('ckpt-numpy');
    expect(header?.memory).to.equal(1024);
    expect(header?.imports).to.deep.equal(['numpy']);
    expect(header?.pythonVersion).to.equal('3.11.2');
    expect(storyOf(await logOnDisk(), 'r-echo')).to.deep.equal([
      'CallRequested',
      'CallPlaced',
      'CallBound',
      'CallFinished',
    ]);
  });

  it('records the demand exactly as the client sent it', async () => {
    await run(test.client, 'echo x', { requestId: 'r-demand', gpu: false });
    const requested = (await logOnDisk()).find(
      (event) => event.type === 'CallRequested' && event.requestId === 'r-demand',
    );
    expect(requested).to.deep.include({
      sessionId: null,
      demand: {
        memory: null,
        gpuMemory: null,
        gpu: false,
        disableOptimizedExecution: false,
        checkpointId: null,
        imports: [],
        packages: [],
        pinned: false,
      },
      retryOf: null,
    });
  });

  it('streams a log line to the client for each skipped package', async () => {
    const outcome = await run(test.client, 'echo pkgs', { packages: ['NumPy>=1.20', 'rich'] });
    expect(codeOf(outcome)).to.equal('OK');
    expect(systemLines(outcome)).to.have.length(1);
    expect(systemLines(outcome)[0]).to.match(/NumPy>=1\.20.*base image/);
    expect(worker.calls.at(-1)?.header.packages).to.deep.equal(['rich']);
  });

  it('passes user log lines through in order', async () => {
    const outcome = await run(test.client, 'logs 3');
    expect(outcome.logs.map((line) => line.text)).to.deep.equal(['line 0', 'line 1', 'line 2']);
    expect(outcome.payload).to.equal('done');
  });

  it('binds the call and pins a session to its new container, then reuses it', async () => {
    const first = await run(test.client, 'echo one', { sessionId: 's-pin', requestId: 'r-pin-1' });
    expect(codeOf(first)).to.equal('OK');
    const pin = test.router.state.sessions.get('s-pin')?.pin;
    expect(pin?.workerId).to.equal('w1');
    const containerId = worker.calls.at(-1)?.containerId;
    expect(pin?.containerId).to.equal(containerId);
    await worker.reportContainer(containerId as string, ContainerState.CONTAINER_STATE_READY);
    const second = await run(test.client, 'echo two', { sessionId: 's-pin' });
    expect(codeOf(second)).to.equal('OK');
    expect(worker.calls.at(-1)?.header.ids?.containerId).to.equal(containerId);
    expect(second.ids.at(-1)?.containerId).to.equal(containerId);
  });
});
