/**
 * The TypeScript client with a list of router addresses, against real routers on a real
 * three-node NATS cluster (a leader and a standby, child processes) and a real worker: a call the
 * standby refuses moves to the leader, a call after the leader died reaches the new one, and a
 * call that may have started is never sent again.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ReadieClient, ReadieError } from '../../src/client/index.js';
import { useNatsCluster } from '../support/nats.js';
import {
  type ChildRouter,
  eventuallyAsync,
  killRouter,
  LEASE_MS,
  PROBE_MS,
  readLog,
  startLeaderAndStandby,
  untilLogged,
} from '../support/jetstream-routers.js';
import { SLEEP_SOURCE, startRealWorker, type RealWorker } from '../support/real-worker.js';
import { finishedLog, storyOf } from '../support/router/harness.js';
import { PYTHON } from '../support/python.js';

const PYTHON_ROOT = fileURLToPath(new URL('../../python/', import.meta.url));

/**
 * A Python client script: one call of `hypot(3, 4)`, `last_call()`'s request ID and the end of a
 * session the cluster never saw (a tenant call), as JSON.
 */
const PYTHON_CALL = [
  'import json, sys, readie',
  '@readie.remote',
  'def hypot(a, b):',
  '    import math',
  '    return math.hypot(a, b)',
  'try:',
  '    value = hypot(3, 4)',
  '    request_id = readie.last_call().request_id',
  // A tenant call: it moves along the list too.
  '    ended = readie.Session().close()',
  '    print(json.dumps({"value": value, "requestId": request_id, "ended": ended}))',
  'except readie.ReadieError as error:',
  '    print(json.dumps({"error": type(error).__name__, "notStarted": error.not_started,',
  '        "standby": error.standby, "leader": error.leader}))',
].join('\n');

/** What the Python script printed. */
interface PythonOutcome {
  readonly value?: number;
  readonly requestId?: string;
  readonly error?: string;
  readonly standby?: boolean;
  readonly leader?: string;
  readonly ended?: boolean;
}

async function pythonCall(address: string): Promise<PythonOutcome> {
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', PYTHON_CALL], {
    env: { ...process.env, PYTHONPATH: PYTHON_ROOT, READIE_ADDRESS: address, READIE_INSECURE: '1' },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) as string) as PythonOutcome;
}

const hypot = { module: 'math', function: 'hypot', args: [3, 4] };

describe('the TypeScript client with several router addresses (real routers on NATS)', function () {
  this.timeout(180_000);
  const nats = useNatsCluster();
  let location: string;
  let leader: ChildRouter;
  let standby: ChildRouter;
  let worker: RealWorker;
  const clients: ReadieClient[] = [];
  const client = (options: ConstructorParameters<typeof ReadieClient>[0]): ReadieClient => {
    const made = new ReadieClient({ insecure: true, ...options });
    clients.push(made);
    return made;
  };

  beforeEach(async () => {
    location = nats.streamLocation('clients');
    ({ leader, standby } = await startLeaderAndStandby(location));
    worker = await startRealWorker(`${leader.address},${standby.address}`);
    await untilLogged(location, 'WorkerRegistered', 'the worker to register with the leader');
  });

  afterEach(async () => {
    for (const made of clients.splice(0)) made.close();
    await worker.stop();
    await killRouter(leader);
    await killRouter(standby);
  });

  it('moves a call the standby refuses to the leader it names, sending it once', async () => {
    const readie = client({
      env: { READIE_ADDRESS: `${standby.address},${leader.address}`, READIE_INSECURE: '1' },
    });
    expect(readie.connection.addresses).to.deep.equal([standby.address, leader.address]);
    const call = readie.start<number>(hypot);
    expect(await call.result).to.equal(5);
    expect(await readie.slots()).to.be.above(0);
    const events = await finishedLog(location, [call.requestId]);
    expect(storyOf(events, call.requestId).filter((t) => t === 'CallRequested')).to.have.length(1);
    // Later calls start at the leader: the standby is not asked again.
    expect(await readie.call(hypot)).to.equal(5);
  });

  it('names the leader when the list holds only a standby (the call never ran)', async () => {
    const readie = client({ address: standby.address });
    const call = readie.start(hypot, { timeoutMs: 2_000 });
    const error = (await call.result.catch((e: unknown) => e)) as ReadieError;
    expect(error).to.be.instanceOf(ReadieError);
    expect(error.codeName).to.equal('UNAVAILABLE');
    expect(error.notStarted, 'not started').to.equal(true);
    expect(error.standby, 'refused by a standby').to.equal(true);
    expect(error.leader).to.equal(leader.address);
    expect(storyOf(await readLog(location), call.requestId)).to.deep.equal([]);
  });

  it('the Python client moves a refused call to the leader too, and names it when it cannot', async () => {
    const moved = await pythonCall(`${standby.address},${leader.address}`);
    expect(moved.value, JSON.stringify(moved)).to.equal(5);
    expect(moved.ended, 'a session the cluster never saw is not ended').to.equal(false);
    const events = await finishedLog(location, [moved.requestId as string]);
    const story = storyOf(events, moved.requestId as string);
    expect(story.filter((t) => t === 'CallRequested')).to.have.length(1);
    expect(story).to.include('CallFinished');
    const refused = await pythonCall(`${standby.address},127.0.0.1:1`);
    expect(refused).to.deep.include({ error: 'ClusterUnavailableError', standby: true });
    expect(refused.leader).to.equal(leader.address);
  });

  it('reaches the new leader after the old one dies, and never resends a call that had started', async () => {
    const readie = client({ address: [leader.address, standby.address] });
    expect(await readie.call(hypot)).to.equal(5);
    const running = readie.start({ source: SLEEP_SOURCE, function: 'nap', args: [20] });
    await eventuallyAsync(
      async () => storyOf(await readLog(location), running.requestId).includes('CallPlaced'),
      'the long call to be placed',
      20_000,
    );
    await killRouter(leader);
    const killedAt = Date.now();
    const lost = (await running.result.catch((e: unknown) => e)) as ReadieError;
    expect(lost).to.be.instanceOf(ReadieError);
    expect(lost.notStarted, 'the call had started').to.equal(false);

    // A new call through the same list waits the failover out at the standby and is served there.
    expect(await readie.call(hypot)).to.equal(5);
    const servedAfter = Date.now() - killedAt;
    expect(servedAfter, 'ms from the kill to a call served').to.be.below(
      LEASE_MS + PROBE_MS + 10_000,
    );
    const events = await readLog(location);
    const story = storyOf(events, running.requestId);
    expect(
      story.filter((t) => t === 'CallRequested'),
      story.join(' '),
    ).to.have.length(1);
    expect(
      events.some((e) => e.type === 'RouterStarted' && e.routerId === 'router-b'),
      'the standby took over',
    ).to.equal(true);
  });
});
