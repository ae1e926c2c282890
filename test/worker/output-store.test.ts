import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { CallOutputStore, type OutputBounds } from '../../src/worker/output/index.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const OUT = LogSource.LOG_SOURCE_STDOUT;

/** A store in a fresh directory on a clock the test moves. */
function storeWith(bounds: Partial<OutputBounds> = {}) {
  const now = { ms: Date.UTC(2026, 0, 1) };
  const dir = join(tempDir('readie-output-'), 'output');
  const store = CallOutputStore.open(
    dir,
    {
      maxCallBytes: 1 << 20,
      maxTotalBytes: 1 << 30,
      maxCalls: 1_000,
      retentionMs: 60_000,
      ...bounds,
    },
    () => now.ms,
  );
  return { store, now, dir };
}

function texts(store: CallOutputStore, requestId: string): string[] {
  const kept = store.read(requestId);
  if (!('lines' in kept)) throw new Error(store.absenceText(requestId, kept));
  return kept.lines.map((line) => line.text);
}

describe('worker: the store of calls output', () => {
  after(cleanTempDirs);

  it('keeps every line in order as written, on disk under a name that is not the request ID', () => {
    const { store, now, dir } = storeWith();
    const writer = store.begin('../../etc/passwd');
    writer.line(OUT, 'one', now.ms);
    writer.line(LogSource.LOG_SOURCE_STDERR, 'two\x1b[2J', now.ms);
    expect(store.read('../../etc/passwd')).to.include({ running: true });
    writer.end(now.ms);
    expect(texts(store, '../../etc/passwd')).to.deep.equal(['one', 'two\x1b[2J']);
    const [file] = readdirSync(dir);
    expect(file).to.match(/^[0-9a-f]{64}\.jsonl$/);
    // A store opened again (a restarted worker) reads what the last one kept.
    const again = CallOutputStore.open(dir, store.bounds, () => now.ms);
    expect(texts(again, '../../etc/passwd')).to.deep.equal(['one', 'two\x1b[2J']);
    expect(readFileSync(join(dir, file!), 'utf8')).to.include('"requestId":"../../etc/passwd"');
  });

  it('cuts a call at OUTPUT_MAX_CALL_BYTES and says so', () => {
    const { store, now } = storeWith({ maxCallBytes: 400 });
    const writer = store.begin('r1');
    for (let i = 0; i < 50; i += 1) writer.line(OUT, `line ${i}`, now.ms);
    writer.end(now.ms);
    const kept = store.read('r1');
    expect('lines' in kept && kept.truncated).to.equal(true);
    expect(texts(store, 'r1').length).to.be.within(1, 10);
    expect(texts(store, 'r1')[0]).to.equal('line 0');
  });

  it('drops the oldest ended calls past OUTPUT_MAX_TOTAL_BYTES and says why, never a running one', () => {
    const { store, now } = storeWith({ maxTotalBytes: 2_000 });
    const running = store.begin('running');
    running.line(OUT, 'x'.repeat(500), now.ms);
    for (const id of ['a', 'b', 'c', 'd']) {
      const writer = store.begin(id);
      writer.line(OUT, 'y'.repeat(400), now.ms);
      writer.end(now.ms);
    }
    expect(store.bytes).to.be.at.most(2_000);
    expect(texts(store, 'running')).to.have.length(1);
    expect(texts(store, 'd')).to.have.length(1);
    const gone = store.read('a');
    expect(gone).to.include({ kind: 'room' });
    expect(store.absenceText('a', gone as never)).to.match(/dropped .* OUTPUT_MAX_TOTAL_BYTES/);
  });

  it('keeps the output of at most OUTPUT_MAX_CALLS calls: the oldest ended go first, naming why, never a running one', () => {
    const { store, now, dir } = storeWith({ maxCalls: 3 });
    const running = store.begin('running');
    running.line(OUT, 'still here', now.ms);
    for (const id of ['a', 'b', 'c', 'd']) {
      const writer = store.begin(id);
      writer.line(OUT, id, now.ms);
      writer.end(now.ms);
    }
    // Three files: the running call and the two calls that ended last.
    expect(readdirSync(dir)).to.have.length(3);
    expect(texts(store, 'running')).to.deep.equal(['still here']);
    expect(texts(store, 'c')).to.deep.equal(['c']);
    expect(texts(store, 'd')).to.deep.equal(['d']);
    for (const id of ['a', 'b']) {
      const gone = store.read(id);
      expect(gone, id).to.include({ kind: 'count' });
      expect(store.absenceText(id, gone as never)).to.equal(
        `the output of call ${id} was dropped at 2026-01-01T00:00:00.000Z to keep the output of at most OUTPUT_MAX_CALLS (3) calls on the worker (oldest first)`,
      );
    }
    // A store opened again over more files than it may keep drops the oldest at once.
    const fewer = CallOutputStore.open(dir, { ...store.bounds, maxCalls: 1 }, () => now.ms);
    expect(readdirSync(dir)).to.have.length(1);
    const dropped = ['running', 'c', 'd'].filter((id) => {
      const kept = fewer.read(id);
      return 'kind' in kept && kept.kind === 'count';
    });
    expect(dropped).to.have.length(2);
  });

  it('forgets a call OUTPUT_RETENTION after it ended, naming why; an unknown ID says it never ran here', () => {
    const { store, now } = storeWith({ retentionMs: 60_000 });
    const writer = store.begin('old');
    writer.line(OUT, 'hi', now.ms);
    writer.end(now.ms);
    now.ms += 59_000;
    expect(texts(store, 'old')).to.deep.equal(['hi']);
    now.ms += 2_000;
    const aged = store.read('old');
    expect(aged).to.include({ kind: 'aged' });
    expect(store.absenceText('old', aged as never)).to.match(
      /aged out .* \(OUTPUT_RETENTION 1m after the call ended\)/,
    );
    expect(store.read('never')).to.deep.equal({ kind: 'unknown' });
  });

  it('tells followers each new line and the end', () => {
    const { store, now } = storeWith();
    const writer = store.begin('r');
    const heard: unknown[] = [];
    store.on('r', (news) => heard.push(news));
    writer.line(OUT, 'a', now.ms);
    writer.end(now.ms);
    expect(heard).to.have.length(2);
    expect(heard[1]).to.equal(null);
  });
});
