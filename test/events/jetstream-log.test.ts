import { expect } from 'chai';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import {
  EventLogError,
  InvalidEventError,
  type ClusterEvent,
  type NewEvent,
} from '../../src/events/index.js';
import { JetStreamEventLog, LogFencedError } from '../../src/events/jetstream/jetstream-log.js';
import { parseJetStreamLocation } from '../../src/events/jetstream/location.js';
import { streamNames } from '../../src/events/jetstream/stream-format.js';
import { clusterProjection, snapshotOf, type ClusterState } from '../../src/projections/index.js';
import { foldWithoutSnapshots } from '../support/events.js';
import { useNatsCluster } from '../support/nats.js';

const START = Date.UTC(2026, 10, 30, 10, 0, 0, 0);
const leaving = (workerId: string): NewEvent => ({ type: 'WorkerLeaving', workerId });
const registered = (workerId: string): NewEvent => ({
  type: 'WorkerRegistered',
  workerId,
  address: `${workerId}:50052`,
  status: 'ready',
  error: null,
  flavor: 'cpu',
  memoryTotal: 8 * 1024 ** 3,
  maxContainers: 4,
  gpuMemoryTotal: null,
  instanceId: null,
  containers: null,
  reportSeq: null,
});

async function all<T>(items: Iterable<T> | AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe('EventLog (JetStream, a real three-node cluster)', function () {
  this.timeout(60_000);
  const nats = useNatsCluster();
  const opened: JetStreamEventLog<ClusterState>[] = [];
  const open = async (location: string, options = {}) => {
    const log = await JetStreamEventLog.open<ClusterState>(parseJetStreamLocation(location), {
      clock: () => START,
      ...options,
    });
    opened.push(log);
    return log;
  };
  afterEach(async () => {
    for (const log of opened.splice(0)) await log.close();
  });

  it('stores each append as one message, seqs contiguous from 1, read back in order', async () => {
    const where = nats.streamLocation();
    const log = await open(where);
    const first = log.append([leaving('a'), leaving('b')], 'reaper');
    const second = log.append(leaving('c'), 'reaper');
    await Promise.all([first.committed, second.durable]);
    expect(log.streamSeq).to.equal(2);
    const reader = await open(where, { readOnly: true });
    expect(reader.firstSeq).to.equal(1);
    expect(reader.lastSeq).to.equal(3);
    const events = await all(reader.read());
    expect(events.map((e) => [e.seq, e.type, e.cause])).to.deep.equal([
      [1, 'WorkerLeaving', 'reaper'],
      [2, 'WorkerLeaving', 'reaper'],
      [3, 'WorkerLeaving', 'reaper'],
    ]);
    expect((await all(reader.read(2, 2))).map((e) => e.seq)).to.deep.equal([2]);
  });

  it('pipelines a burst of appends, each fenced on the one before', async () => {
    const log = await open(nats.streamLocation());
    const results = Array.from({ length: 500 }, (_, i) => log.append(registered(`w${i}`)));
    await Promise.all(results.map((r) => r.committed));
    expect(log.lastSeq).to.equal(500);
    expect(log.streamSeq).to.equal(500);
    const reopened = await open(log.location, { projection: clusterProjection });
    expect(reopened.state.workers.size).to.equal(500);
  });

  it('refuses the append of a writer that another writer overtook, and every later one', async () => {
    const where = nats.streamLocation();
    const old = await open(where, { projection: clusterProjection });
    await old.append(registered('w1'), 'report:w1').committed;
    const usurper = await open(where, { projection: clusterProjection });
    await usurper.append(leaving('w1'), 'report:w1').committed;
    const late = old.append(registered('w2'), 'report:w2');
    let refused: unknown;
    await late.committed.catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(LogFencedError);
    expect(() => old.append(leaving('w2'))).to.throw(LogFencedError);
    const reader = await open(where, { readOnly: true, projection: clusterProjection });
    expect((await all(reader.read())).map((e) => [e.seq, e.type])).to.deep.equal([
      [1, 'WorkerRegistered'],
      [2, 'WorkerLeaving'],
    ]);
    expect(reader.state.workers.has('w2')).to.equal(false);
  });

  it('recovers from the newest snapshot plus the tail, inline or in the object store', async () => {
    for (const inlineSnapshotLimit of [undefined, 16]) {
      const where = nats.streamLocation();
      const log = await open(where, {
        projection: clusterProjection,
        snapshotEvery: 4,
        inlineSnapshotLimit,
      });
      for (let i = 0; i < 10; i += 1) await log.append(registered(`w${i}`)).committed;
      // Seqs 1-4, snapshot 5, 6-9, snapshot 10, 11-12.
      expect(log.lastSeq).to.equal(12);
      const reopened = await open(where, { projection: clusterProjection, readOnly: true });
      expect(await reopened.snapshotAtOrBefore()).to.equal(10);
      expect(await reopened.snapshotAtOrBefore(9)).to.equal(5);
      const events = await all(reopened.read());
      expect(events.map((e) => e.seq)).to.deep.equal(Array.from({ length: 12 }, (_, i) => i + 1));
      expect(snapshotOf(reopened.state)).to.deep.equal(snapshotOf(foldWithoutSnapshots(events)));
    }
    // The large snapshots really went to the object store.
    const nc = await connect({ servers: nats.cluster.nodes.map((n) => n.url) });
    try {
      const names = await jetstream(nc).jetstreamManager();
      const buckets = await all(names.streams.names());
      expect(buckets.some((name) => name.endsWith('-snapshots'))).to.equal(true);
    } finally {
      await nc.close();
    }
  });

  it('keeps the seqs of an imported range that starts mid-log, and refuses a gap', async () => {
    const source = await open(nats.streamLocation());
    for (let i = 0; i < 5; i += 1) await source.append(leaving(`w${i}`), `report:w${i}`).committed;
    const stored = (await all(source.readStored(3))).slice();
    const target = await open(nats.streamLocation(), { seqOffset: 2 });
    await target.appendStored(stored).committed;
    const back = await all(target.readStored());
    expect(back.map((s) => s.text)).to.deep.equal(stored.map((s) => s.text));
    expect(target.firstSeq).to.equal(3);
    expect(() => target.appendStored(stored.slice(0, 1))).to.throw(InvalidEventError, /expected 6/);
  });

  it('follows the stream as another writer appends', async () => {
    const where = nats.streamLocation();
    const writer = await open(where);
    await writer.append(leaving('a')).committed;
    const standby = await open(where, { projection: clusterProjection });
    const heard: ClusterEvent[] = [];
    standby.startFollowing((event) => heard.push(event));
    await writer.append(registered('w1')).committed;
    await writer.append(registered('w2')).committed;
    const deadline = Date.now() + 5_000;
    while (standby.lastSeq < 3 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(heard.map((e) => e.seq)).to.deep.equal([2, 3]);
    expect(standby.state.workers.size).to.equal(2);
    expect(() => standby.append(leaving('w1'))).to.throw(EventLogError, /followed/);
    await standby.stopFollowing();
    await writer.append(leaving('w2')).committed;
    await standby.catchUp();
    await standby.append(leaving('w1')).committed;
    expect(standby.lastSeq).to.equal(5);
  });

  it('stops following at once when told to before its reader has started (a lease won at once)', async () => {
    // A standby that wins the lease a moment after it began to follow stops while its reader is
    // still making its consumer: that stop must end the reader, not be missed (the takeover then
    // waited for it forever, the stream idle with no leader to append).
    const where = nats.streamLocation();
    const writer = await open(where);
    await writer.append(leaving('a')).committed;
    const standby = await open(where, { projection: clusterProjection });
    standby.startFollowing();
    const stopped = standby.stopFollowing().then(() => 'stopped');
    const late = new Promise((resolve) => setTimeout(() => resolve('still following'), 10_000));
    expect(await Promise.race([stopped, late])).to.equal('stopped');
    await standby.append(leaving('w1')).committed;
    expect(standby.lastSeq).to.equal(2);
  });

  it('refuses a stream that is not a readie log', async () => {
    const where = parseJetStreamLocation(nats.streamLocation());
    const nc = await connect({ servers: [...where.servers] });
    try {
      const jsm = await jetstream(nc).jetstreamManager();
      await jsm.streams.add({
        name: where.stream,
        subjects: [`other.${where.stream}`],
        num_replicas: 1,
      });
    } finally {
      await nc.close();
    }
    let error: unknown;
    await JetStreamEventLog.open(where).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(EventLogError);
    expect((error as Error).message).to.match(/not a readie event log/);
    expect(streamNames(where.stream).eventsSubject).to.equal(`readie.${where.stream}.events`);
  });
});
