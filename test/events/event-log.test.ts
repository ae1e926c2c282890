import { expect } from 'chai';
import { open } from 'lmdb';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  EVENT_SCHEMA_VERSION,
  EventLog,
  EventLogError,
  InvalidEventError,
  type ClusterEvent,
  type NewEvent,
} from '../../src/events/index.js';
import { clusterProjection, snapshotOf, type ClusterState } from '../../src/projections/index.js';
import { foldWithoutSnapshots, requested } from '../support/events.js';
import { runScript } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

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

/** The events database of a log, opened behind the EventLog's back to damage it. */
function rawEvents(dir: string) {
  const env = open({ path: join(dir, 'events.mdb'), maxDbs: 4 });
  const events = env.openDB<string, number>({ name: 'events', encoding: 'string' });
  return { put: (seq: number, text: string) => events.put(seq, text), close: () => env.close() };
}

function manualClock(start = START) {
  let now = start;
  return { clock: () => now, advance: (ms: number) => (now += ms) };
}

describe('EventLog (LMDB)', () => {
  afterEach(cleanTempDirs);

  it('assigns contiguous seqs from 1 and stamps at from the injected clock', async () => {
    const time = manualClock();
    const log = EventLog.open(tempDir(), { clock: time.clock });
    const first = log.append([leaving('a'), leaving('b')]);
    time.advance(1500);
    const second = log.append(leaving('c'));
    await second.committed;
    expect([...first.events, ...second.events].map((e) => [e.seq, e.at])).to.deep.equal([
      [1, '2026-11-30T10:00:00.000Z'],
      [2, '2026-11-30T10:00:00.000Z'],
      [3, '2026-11-30T10:00:01.500Z'],
    ]);
    expect([...log.read()].map((e) => e.seq)).to.deep.equal([1, 2, 3]);
    await log.close();
  });

  it('writes optional fields as null and the envelope first', async () => {
    const dir = tempDir();
    const log = EventLog.open(dir, { clock: manualClock().clock });
    await log.append({ type: 'CallFinished', requestId: 'r1', ok: true } as NewEvent).committed;
    const [stored] = [...log.readStored()];
    expect(stored?.text).to.equal(
      '{"seq":1,"at":"2026-11-30T10:00:00.000Z","cause":null,"type":"CallFinished","requestId":"r1","ok":true,"code":null,"message":null,"raised":null,"inputsRaised":null}',
    );
    await log.close();
  });

  it("stamps every event of an append with the append's cause, whatever the events carry", async () => {
    const dir = tempDir();
    const log = EventLog.open(dir, { clock: manualClock().clock });
    const forged = { type: 'WorkerLeaving', workerId: 'w1', cause: 'reaper', seq: 99 };
    await log.append([{ type: 'WorkerLeaving', workerId: 'w2' }, forged as NewEvent], 'report:w1')
      .committed;
    expect([...log.read()].map((e) => [e.seq, e.cause])).to.deep.equal([
      [1, 'report:w1'],
      [2, 'report:w1'],
    ]);
    expect(() => log.append({ type: 'WorkerLeaving', workerId: 'w3' }, 'bored')).to.throw(
      /field "cause": expected a string matching/,
    );
    await log.close();
  });

  it('refuses to append an event that does not fit the vocabulary, and appends nothing', async () => {
    const log = EventLog.open(tempDir());
    expect(() =>
      log.append({ type: 'WorkerEvicted', workerId: 'w', reason: 'bored' } as unknown as NewEvent),
    ).to.throw(InvalidEventError, 'seq 1: field "reason"');
    await log.append(leaving('w')).committed;
    expect([...log.read()].map((e) => e.seq)).to.deep.equal([1]);
    await log.close();
  });

  it('refuses a whole batch when any event in it is malformed: nothing stored, nothing folded', async () => {
    const log = EventLog.open<ClusterState>(tempDir(), { projection: clusterProjection });
    expect(() =>
      log.append([
        leaving('w'),
        { type: 'WorkerEvicted', workerId: 'w', reason: 'bored' } as unknown as NewEvent,
      ]),
    ).to.throw(InvalidEventError, 'seq 2: field "reason"');
    expect(log.lastSeq).to.equal(0);
    expect(log.state.lastSeq).to.equal(0);
    await log.flushed();
    expect([...log.read()]).to.deep.equal([]);
    await log.close();
  });

  it('refuses a whole stored batch whose seqs do not run on, storing none of it', async () => {
    const source = EventLog.open(tempDir());
    await source.append([leaving('a'), leaving('b'), leaving('c')]).committed;
    const [first, , third] = [...source.readStored()];
    await source.close();
    const log = EventLog.open(tempDir());
    expect(() => log.appendStored([first!, third!])).to.throw(InvalidEventError, 'expected 2');
    await log.flushed();
    expect([...log.read()]).to.deep.equal([]);
    await log.close();
  });

  it('puts appends made in the same turn into one transaction', async () => {
    const log = EventLog.open(tempDir());
    await log.append(leaving('warm-up')).committed;
    const before = log.lastTransactionId;
    const a = log.append(leaving('a'));
    const b = log.append([leaving('b'), leaving('c')]);
    await Promise.all([a.committed, b.committed]);
    expect(log.lastTransactionId - before).to.equal(1);
    await log.append(leaving('d')).committed;
    await log.append(leaving('e')).committed;
    expect(log.lastTransactionId - before).to.equal(3);
    await log.close();
  });

  it('gives the appends of one transaction one committed, and an append after it its own', async () => {
    const log = EventLog.open(tempDir());
    const a = log.append(leaving('a'));
    const b = log.append([leaving('b'), leaving('c')]);
    expect(b.committed).to.equal(a.committed);
    await b.committed;
    const c = log.append(leaving('d'));
    expect(c.committed).to.not.equal(a.committed);
    await Promise.all([c.committed, a.durable, c.durable]);
    expect([...log.read()].map((e) => e.seq)).to.deep.equal([1, 2, 3, 4]);
    await log.close();
  });

  it('resolves durable after committed, and both mean the events can be read', async () => {
    const dir = tempDir();
    const log = EventLog.open(dir);
    const order: string[] = [];
    const result = log.append([leaving('a'), leaving('b')]);
    const done = Promise.all([
      result.committed.then(() => order.push('committed')),
      result.durable.then(() => order.push('durable')),
    ]);
    await done;
    expect(order).to.deep.equal(['committed', 'durable']);
    const reader = EventLog.open(dir, { readOnly: true });
    expect([...reader.read()].map((e) => e.seq)).to.deep.equal([1, 2]);
    await reader.close();
    await log.close();
  });

  it('reads a range in order, inclusive at both ends', async () => {
    const log = EventLog.open(tempDir());
    await log.append(Array.from({ length: 10 }, (_, i) => leaving(`w${i}`))).committed;
    expect([...log.read(4, 7)].map((e) => e.seq)).to.deep.equal([4, 5, 6, 7]);
    expect([...log.read(9)].map((e) => e.seq)).to.deep.equal([9, 10]);
    expect([...log.read(11)]).to.deep.equal([]);
    await log.close();
  });

  it('continues its seq when reopened', async () => {
    const dir = tempDir();
    const log = EventLog.open(dir);
    await log.append([leaving('a'), leaving('b')]).committed;
    await log.close();
    const again = EventLog.open(dir);
    expect(again.lastSeq).to.equal(2);
    const next = again.append(leaving('c'));
    expect(next.events[0]?.seq).to.equal(3);
    await next.committed;
    expect([...again.read()].map((e) => e.seq)).to.deep.equal([1, 2, 3]);
    await again.close();
  });

  it('follows: yields what is there, then each event as it is committed', async () => {
    const log = EventLog.open(tempDir());
    await log.append([leaving('a'), leaving('b')]).committed;
    const abort = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const event of log.follow(2, abort.signal)) {
        seen.push(event.seq);
        if (event.seq === 4) abort.abort();
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 20));
    log.append(leaving('c'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    log.append(leaving('d'));
    await following;
    expect(seen).to.deep.equal([2, 3, 4]);
    await log.close();
  });

  it('follows a log longer than the chunk it reads at once: every event, in order, none twice', async () => {
    const log = EventLog.open(tempDir());
    await log.append(Array.from({ length: 2_500 }, (_, i) => leaving(`w${i}`))).committed;
    const abort = new AbortController();
    const seen: number[] = [];
    for await (const event of log.follow(1, abort.signal)) {
      seen.push(event.seq);
      // The consumer yields to the event loop between events, as a slow follower does.
      if (event.seq % 500 === 0) await new Promise((resolve) => setImmediate(resolve));
      if (event.seq === 2_500) abort.abort();
    }
    expect(seen).to.deep.equal(Array.from({ length: 2_500 }, (_, i) => i + 1));
    await log.close();
  });

  it('lets only one writer open a log: a second one in another process gets a clear error', async () => {
    const dir = tempDir();
    const writer = runScript('scripts/append-loop.ts', [dir, '1', 'Infinity']);
    try {
      await writer.waitFor(/^durable 3$/);
      expect(() => EventLog.open(dir)).to.throw(
        EventLogError,
        new RegExp(`is being written by process ${writer.process.pid}; only one writer`),
      );
      const reader = EventLog.open(dir, { readOnly: true });
      expect(reader.lastSeq).to.be.at.least(3);
      expect(() => reader.append(leaving('x'))).to.throw(EventLogError, 'read-only');
      await reader.close();
    } finally {
      writer.process.kill('SIGKILL');
      await writer.exited;
    }
    const after = EventLog.open(dir);
    expect(after.lastSeq).to.be.at.least(3);
    await after.close();
  });

  it('refuses a second writer in the same process', async () => {
    const dir = tempDir();
    const log = EventLog.open(dir);
    expect(() => EventLog.open(dir)).to.throw(
      EventLogError,
      'already open for writing in this process',
    );
    await log.close();
    const again = EventLog.open(dir);
    await again.close();
  });

  it('lets a reader in this process follow a writer in another process', async () => {
    const dir = tempDir();
    const writer = runScript('scripts/append-loop.ts', [dir, '2', '5']);
    const abort = new AbortController();
    // However slow the machine, the follower stops and the writer dies with the test.
    const deadline = setTimeout(() => abort.abort(), 25_000);
    try {
      await writer.waitFor(/^open$/);
      await writer.waitFor(/^committed 2$/);
      const reader = EventLog.open(dir, { readOnly: true, pollInterval: 10 });
      const seen: number[] = [];
      try {
        for await (const event of reader.follow(1, abort.signal)) {
          seen.push(event.seq);
          if (event.seq === 10) abort.abort();
        }
      } finally {
        await reader.close();
      }
      expect(seen).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect((await writer.exited).code).to.equal(0);
    } finally {
      clearTimeout(deadline);
      writer.process.kill('SIGKILL');
    }
  });

  it('says clearly when a read-only log is still being created by its writer', async () => {
    const dir = tempDir();
    const env = open({ path: join(dir, 'events.mdb'), maxDbs: 4 });
    await env.put('not-yet', 1);
    expect(() => EventLog.open(dir, { readOnly: true })).to.throw(
      EventLogError,
      'is not initialized yet',
    );
    await env.close();
  });

  it("refuses a data file that is not LMDB's (zeroed, another file, empty read-only) by name, never crashing the process", () => {
    const open = (contents: Buffer, mode: 'read-only' | 'writer') => {
      const dir = tempDir();
      writeFileSync(join(dir, 'events.mdb'), contents);
      const run = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          fileURLToPath(new URL('../support/scripts/open-log.ts', import.meta.url)),
          dir,
          mode,
        ],
        { encoding: 'utf8' },
      );
      expect(run.signal, `${mode} open of ${contents.length} bytes: ${run.stderr}`).to.equal(null);
      expect(run.status, run.stderr).to.equal(0);
      return { dir, out: run.stdout.trim() };
    };
    const zeroed = open(Buffer.alloc(20_000), 'writer');
    expect(zeroed.out).to.equal(
      `refused: event log ${zeroed.dir} is damaged: events.mdb is not an LMDB data file (20000 bytes, no LMDB header in either meta page): move the directory aside (its archive files, if any, still replay) and restore the log from a backup`,
    );
    const text = open(Buffer.from('{"seq":1}\n'.repeat(50)), 'read-only');
    expect(text.out).to.equal(
      `refused: event log ${text.dir} is not readable: events.mdb is not an LMDB data file (500 bytes, no LMDB header in either meta page): a log still being created, or a damaged one`,
    );
    const empty = open(Buffer.alloc(0), 'read-only');
    expect(empty.out).to.equal(
      `refused: event log ${empty.dir} is not readable: events.mdb is empty (no LMDB header yet): a log still being created, or a damaged one`,
    );
    // An empty file is what a writer creates first: a writer makes it a log.
    expect(open(Buffer.alloc(0), 'writer').out).to.equal('opened 0');
  });

  it('says clearly when a read-only log does not exist', () => {
    expect(() => EventLog.open(join(tempDir(), 'nothing'), { readOnly: true })).to.throw(
      EventLogError,
      'no event log at',
    );
  });

  it('refuses a log written under a newer schema version', async () => {
    const dir = tempDir();
    await EventLog.open(dir).close();
    const raw = open({ path: join(dir, 'events.mdb'), maxDbs: 4 });
    const meta = raw.openDB({ name: 'meta' });
    await meta.put('schemaVersion', EVENT_SCHEMA_VERSION + 1);
    await raw.close();
    expect(() => EventLog.open(dir)).to.throw(
      EventLogError,
      `event schema v${EVENT_SCHEMA_VERSION + 1}; this readie reads up to v${EVENT_SCHEMA_VERSION}`,
    );
  });

  it('names the seq of a corrupt stored event', async () => {
    const dir = tempDir();
    const log = EventLog.open(dir);
    await log.append([leaving('a'), leaving('b'), leaving('c')]).committed;
    await log.close();
    const raw = rawEvents(dir);
    await raw.put(2, '{"seq":2,"at":"2026-11-30T10:00:00.000Z","type":"WorkerLeaving"}');
    await raw.close();
    const reader = EventLog.open(dir, { readOnly: true });
    expect(() => [...reader.read()]).to.throw(
      InvalidEventError,
      'seq 2: field "workerId": is required but missing',
    );
    await reader.close();
  });

  describe('value format', () => {
    /** A log as readie wrote it before the binary codec: JSON text values, no format marker. */
    async function writeJsonLog(dir: string, texts: readonly string[]): Promise<void> {
      const env = open({ path: join(dir, 'events.mdb'), maxDbs: 4 });
      const events = env.openDB<string, number>({ name: 'events', encoding: 'string' });
      const meta = env.openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' });
      env.openDB<boolean, number>({ name: 'snapshots', encoding: 'msgpack' });
      await meta.put('schemaVersion', 1);
      for (const [i, text] of texts.entries()) await events.put(i + 1, text);
      await env.close();
    }

    it('opens a log written as JSON text, keeps its texts, and appends to it in the codec', async () => {
      const dir = tempDir();
      const texts = [
        '{"seq":1,"at":"2026-11-30T10:00:00.000Z","cause":"report:a","type":"WorkerLeaving","workerId":"a"}',
        // The documented vocabulary: no cause, absent optional fields.
        '{"seq":2,"at":"2026-11-30T10:00:01.000Z","type":"WorkerProbeFailed","workerId":"a","consecutive":1}',
      ];
      await writeJsonLog(dir, texts);
      const log = EventLog.open<ClusterState>(dir, {
        projection: clusterProjection,
        clock: () => START,
      });
      expect(log.lastSeq).to.equal(2);
      await log.append(leaving('b'), 'report:b').committed;
      const stored = [...log.readStored()];
      expect(stored.slice(0, 2).map((s) => s.text)).to.deep.equal(texts);
      expect(stored.map((s) => s.event.seq)).to.deep.equal([1, 2, 3]);
      expect(log.origin()).to.deep.include({
        seq: 1,
        at: '2026-11-30T10:00:00.000Z',
        routerId: null,
        stream: null,
      });
      expect(log.origin()?.id).to.match(/^[0-9a-f]{16}$/);
      await log.close();
      const raw = open({ path: join(dir, 'events.mdb'), maxDbs: 5 });
      const values = raw.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
      const meta = raw.openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' });
      // The old values stay text, the new one is binary, and the log says it may hold both.
      expect(values.get(1)?.toString('utf8')).to.equal(texts[0]);
      expect(values.get(3)?.[0]).to.equal(6);
      expect(meta.get('valueFormat')).to.equal('readie-binary-v5');
      await raw.close();
      const reader = EventLog.open(dir, { readOnly: true });
      expect([...reader.read()].map((e) => e.type)).to.deep.equal([
        'WorkerLeaving',
        'WorkerProbeFailed',
        'WorkerLeaving',
      ]);
      await reader.close();
    });

    it('stores an append in a fraction of its JSON text', async () => {
      const log = EventLog.open(tempDir());
      await log.append(registered('w1'), 'report:w1').committed;
      const [stored] = [...log.readStored()];
      const raw = open({ path: join(log.dir, 'events.mdb'), maxDbs: 5, readOnly: true });
      const value = raw.openDB<Buffer, number>({ name: 'events', encoding: 'binary' }).get(1);
      expect(value?.length).to.be.below(Buffer.byteLength(stored?.text ?? '') / 2);
      await raw.close();
      await log.close();
    });

    for (const [marker, first] of [
      ['readie-binary-v1', 1],
      ['readie-binary-v2', 3],
      ['readie-binary-v3', 4],
      ['readie-binary-v4', 5],
    ] as const) {
      it(`reads a log marked ${marker} as written, appends in format 5 and marks the log so`, async () => {
        const dir = tempDir();
        const opened = EventLog.open(dir, { clock: () => START });
        await opened.append(leaving('a'), 'report:a').committed;
        await opened.close();
        // As an older readie left it: its marker, and a value of its format (a load report's
        // layout is the same in every format, so its bytes after the first are too).
        let raw = open({ path: join(dir, 'events.mdb'), maxDbs: 5 });
        const values = raw.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
        const value = values.get(1) as Buffer;
        await values.put(1, Buffer.concat([Buffer.of(first), value.subarray(1)]));
        await raw.openDB({ name: 'meta' }).put('valueFormat', marker);
        await raw.close();
        const reader = EventLog.open(dir, { readOnly: true });
        expect([...reader.read()].map((e) => e.type)).to.deep.equal(['WorkerLeaving']);
        await reader.close();
        const writer = EventLog.open(dir, { clock: () => START });
        await writer.append(leaving('b'), 'report:b').committed;
        expect(
          [...writer.read()].map((e) => (e.type === 'WorkerLeaving' ? e.workerId : '')),
        ).to.deep.equal(['a', 'b']);
        await writer.close();
        raw = open({ path: join(dir, 'events.mdb'), maxDbs: 5, readOnly: true });
        const after = raw.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
        expect([after.get(1)?.[0], after.get(2)?.[0]]).to.deep.equal([first, 6]);
        expect(
          raw.openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' }).get('valueFormat'),
        ).to.equal('readie-binary-v5');
        await raw.close();
      });
    }

    it('refuses a log written in a value format it does not know', async () => {
      const dir = tempDir();
      await EventLog.open(dir).close();
      const raw = open({ path: join(dir, 'events.mdb'), maxDbs: 5 });
      await raw.openDB({ name: 'meta' }).put('valueFormat', 'readie-binary-v9');
      await raw.close();
      expect(() => EventLog.open(dir, { readOnly: true })).to.throw(
        EventLogError,
        'stores its events as "readie-binary-v9"',
      );
    });
  });

  describe('snapshots', () => {
    const events = (n: number, offset = 0) =>
      Array.from({ length: n }, (_, i) => registered(`w${offset + i}`));

    it('appends a Snapshot every N events holding the folded state', async () => {
      const log = EventLog.open<ClusterState>(tempDir(), {
        projection: clusterProjection,
        snapshotEvery: 5,
      });
      for (let i = 0; i < 12; i += 1) {
        log.append(events(1, i));
        expect(log.state.lastSeq, `after append ${String(i)}`).to.equal(log.lastSeq);
      }
      await log.flushed();
      const all = [...log.read()];
      const snapshots = all.filter((e) => e.type === 'Snapshot');
      expect(snapshots.map((e) => e.seq)).to.deep.equal([6, 12]);
      const snapshot = snapshots[0] as Extract<ClusterEvent, { type: 'Snapshot' }>;
      expect(Object.keys(snapshot.state.workers as object)).to.have.length(5);
      expect(snapshot.state).to.deep.equal(
        snapshotOf(foldWithoutSnapshots(all.filter((e) => e.seq < 6))),
      );
      expect(log.state).to.deep.equal(foldWithoutSnapshots(all));
      await log.close();
    });

    it('spaces snapshots by the remembered calls: never more often than the state grows', async () => {
      const log = EventLog.open<ClusterState>(tempDir(), {
        projection: clusterProjection,
        snapshotEvery: 4,
      });
      log.append(registered('w1'));
      // Each tenant call is remembered (for its retries), so the state grows by one per event.
      for (let i = 0; i < 30; i += 1) log.append(requested(`r${i}`, { tenantId: 'acme' }));
      await log.flushed();
      const all = [...log.read()];
      const seqs = all.filter((e) => e.type === 'Snapshot').map((e) => e.seq);
      // Every 4 events, and each at least 4 events after the last for every call that one carried.
      expect(seqs).to.deep.equal([5, 18]);
      const at = (seq: number) =>
        (all.find((e) => e.seq === seq) as Extract<ClusterEvent, { type: 'Snapshot' }>).state;
      expect(Object.keys((at(5).routing as { calls: object }).calls)).to.have.length(3);
      expect(Object.keys((at(18).routing as { calls: object }).calls)).to.have.length(15);
      expect(log.state).to.deep.equal(foldWithoutSnapshots(all));
      await log.close();
    });

    it('opens at the current state from the newest snapshot plus the tail', async () => {
      const dir = tempDir();
      const log = EventLog.open<ClusterState>(dir, {
        projection: clusterProjection,
        snapshotEvery: 4,
      });
      for (let i = 0; i < 10; i += 1) log.append(events(1, i));
      await log.close();
      const reader = EventLog.open(dir, { readOnly: true });
      const expected = foldWithoutSnapshots([...reader.read()]);
      await reader.close();
      // Break an event before the newest snapshot: opening must not need it.
      const raw = rawEvents(dir);
      await raw.put(2, 'garbage');
      await raw.close();
      const reopened = EventLog.open<ClusterState>(dir, {
        projection: clusterProjection,
        snapshotEvery: 4,
      });
      expect(reopened.snapshotAtOrBefore()).to.equal(10);
      expect(reopened.state).to.deep.equal(expected);
      expect(() => [...reopened.read()]).to.throw(InvalidEventError, 'seq 2');
      await reopened.close();
    });
  });
});
