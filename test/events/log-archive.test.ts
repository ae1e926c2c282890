/**
 * Retention on the LMDB log: old segments move to verified archive files and leave the live log,
 * which always starts at a snapshot; the archive plus the live log hold every event, with its
 * text; the newest snapshot and calls in flight stay live; old archive files expire; a damaged
 * file is named with its seq range; another log's archive is refused.
 */
import { expect } from 'chai';
import { readFileSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  ArchiveFile,
  DamagedArchiveError,
  EventLog,
  EventLogError,
  EVENT_SCHEMA_VERSION,
  type ClusterEvent,
  type EventOf,
} from '../../src/events/index.js';
import { clusterProjection, snapshotOf, type ClusterState } from '../../src/projections/index.js';
import {
  appendHistory,
  archivedEvents,
  archiverFor,
  DAY,
  HOUR,
  liveEvents,
  testClock,
} from '../support/archive.js';
import { finished, foldWithoutSnapshots } from '../support/events.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

function openLog(dir: string, clock: { now: () => number }) {
  return EventLog.open<ClusterState>(dir, {
    projection: clusterProjection,
    clock: clock.now,
    snapshotEvery: 40,
  });
}

/** A log of 30 hours' history, and its archiver into `archiveDir` with a day's retention. */
async function dayRetainedLog(archiveDir: string, clock = testClock()) {
  const log = openLog(tempDir(), clock);
  await appendHistory(log, clock, { hours: 30 });
  return { log, archiver: archiverFor(log, archiveDir, clock, { logRetentionMs: DAY }) };
}

const archivedIn = (events: readonly ClusterEvent[]) =>
  events.filter((e): e is EventOf<'LogSegmentArchived'> => e.type === 'LogSegmentArchived');

describe('log retention (LMDB)', () => {
  afterEach(cleanTempDirs);

  it('moves segments older than the retention to verified files; archive plus live give back every event', async () => {
    const clock = testClock();
    const dir = tempDir();
    const archiveDir = join(tempDir(), 'archive');
    const log = openLog(dir, clock);
    await appendHistory(log, clock, { hours: 48 });
    const before = await liveEvents(log);
    const archiver = archiverFor(
      log,
      archiveDir,
      clock,
      { logRetentionMs: DAY },
      {
        fileEvents: 100,
      },
    );
    const report = await archiver.pass();
    expect(report.archived.length).to.be.greaterThan(1);
    const first = log.firstSeq as number;
    // The live log starts at a snapshot about a day old; everything before is archived.
    const [start] = [...log.read(first, first)];
    expect(start?.type).to.equal('Snapshot');
    expect(Date.parse(start?.at ?? '')).to.be.within(
      clock.now() - DAY - 2 * HOUR,
      clock.now() - DAY,
    );
    const archived = await archivedEvents(archiveDir);
    expect(archived.map((s) => s.event.seq)).to.deep.equal(
      Array.from({ length: first - 1 }, (_, i) => i + 1),
    );
    const after = await liveEvents(log);
    const whole = [...archived, ...after.filter((s) => s.event.seq < before.length + 1)];
    expect(whole.map((s) => s.text)).to.deep.equal(before.map((s) => s.text));
    // Each file was logged once, in order, with what it holds.
    const logged = archivedIn(after.map((s) => s.event));
    const files = ArchiveDirectory.open(archiveDir).entries();
    expect(logged.map((e) => [e.fromSeq, e.toSeq, e.file])).to.deep.equal(
      files.map((f) => [f.fromSeq, f.toSeq, f.file]),
    );
    expect(logged.every((e) => e.reason === 'retention' && e.cause === 'archive')).to.equal(true);
    for (const event of logged) {
      const header = (await ArchiveFile.open(join(archiveDir, event.file))).header;
      expect(header.origin).to.deep.equal(log.origin());
      expect(header.rulesVersions).to.deep.equal([1]);
      expect(header.schemaVersions).to.deep.equal([EVENT_SCHEMA_VERSION]);
      expect(readFileSync(join(archiveDir, event.file)).length).to.equal(event.bytes);
    }
    // The state folded from the live log alone is the state of the whole history.
    await log.close();
    const reopened = openLog(dir, clock);
    expect(snapshotOf(reopened.state)).to.deep.equal(
      snapshotOf(foldWithoutSnapshots([...archived, ...after].map((s) => s.event))),
    );
    // A second pass finds nothing more to do.
    const again = await archiverFor(reopened, archiveDir, clock, { logRetentionMs: DAY }).pass();
    expect(again.archived).to.deep.equal([]);
    await reopened.close();
  });

  it('keeps the live log flat: after the retention window it grows no more', async () => {
    const clock = testClock();
    const log = openLog(tempDir(), clock);
    const archiver = archiverFor(log, join(tempDir(), 'archive'), clock, {
      logRetentionMs: 6 * HOUR,
    });
    const sizes: number[] = [];
    for (let day = 0; day < 6; day += 1) {
      await appendHistory(log, clock, { hours: 12, prefix: `d${day}-` });
      await archiver.pass();
      sizes.push(log.lastSeq - (log.firstSeq as number) + 1);
    }
    const settled = sizes.slice(1);
    expect(Math.max(...settled) - Math.min(...settled), sizes.join(' ')).to.be.below(60);
    await log.close();
  });

  it('never archives the newest snapshot, what follows it, or a call still in flight', async () => {
    const clock = testClock();
    const log = openLog(tempDir(), clock);
    const inFlight = await appendHistory(log, clock, { hours: 30, leaveInFlight: true });
    await appendHistory(log, clock, { hours: 10, prefix: 'later' });
    // Much later: everything is past its retention.
    clock.advance(10 * DAY);
    const archiver = archiverFor(log, join(tempDir(), 'archive'), clock, { logRetentionMs: HOUR });
    await archiver.pass();
    const first = log.firstSeq as number;
    const live = [...log.read()];
    const request = live.find((e) => e.type === 'CallRequested' && e.requestId === inFlight);
    expect(request, 'the call in flight is still live').to.not.equal(undefined);
    // Segments closed after it: only the call kept them live.
    expect(log.snapshotsBetween(request?.seq ?? 0, log.lastSeq).length).to.be.greaterThan(2);
    expect(first).to.be.below(request?.seq ?? 0);
    // Once it ends, its segment goes too (the newest snapshot still stays).
    log.append(finished(inFlight as string), 'end:x');
    await archiver.pass();
    expect(log.firstSeq).to.equal(log.snapshotAtOrBefore());
    await log.close();
  });

  it('archives the oldest segments while the live log holds more than LOG_MAX_BYTES', async () => {
    const clock = testClock();
    const log = openLog(tempDir(), clock);
    await appendHistory(log, clock, { hours: 40, perHour: 10 });
    const bytes = log.liveBytes();
    const archiver = archiverFor(log, join(tempDir(), 'archive'), clock, {
      logMaxBytes: Math.floor(bytes / 3),
    });
    const report = await archiver.pass();
    expect(report.archived.length).to.be.greaterThan(0);
    expect(report.archived.every((e) => e.type === 'LogSegmentArchived' && e.reason === 'size'));
    expect(log.liveBytes()).to.be.below(bytes);
    await log.close();
  });

  it('deletes archive files past ARCHIVE_RETENTION, logging each', async () => {
    const clock = testClock();
    const archiveDir = join(tempDir(), 'archive');
    const log = openLog(tempDir(), clock);
    await appendHistory(log, clock, { hours: 72 });
    const policy = { logRetentionMs: DAY, archiveRetentionMs: 2 * DAY };
    await archiverFor(log, archiveDir, clock, { logRetentionMs: DAY }, { fileEvents: 100 }).pass();
    const before = ArchiveDirectory.open(archiveDir).entries();
    const report = await archiverFor(log, archiveDir, clock, policy).pass();
    const after = ArchiveDirectory.open(archiveDir).entries();
    expect(report.expired).to.be.greaterThan(0);
    expect(after.length).to.equal(before.length - report.expired);
    const expired = [...log.read()].filter((e) => e.type === 'LogArchiveExpired');
    expect(expired.map((e) => e.type === 'LogArchiveExpired' && e.file)).to.deep.equal(
      before.slice(0, report.expired).map((f) => f.file),
    );
    // What is left is a window that starts at a snapshot.
    const oldest = await ArchiveFile.open(after[0]?.path as string);
    for await (const stored of oldest.readStored()) {
      expect(stored.event.type).to.equal('Snapshot');
      break;
    }
    await log.close();
  });

  it('names a damaged file and its seq range, and refuses another log archive directory', async () => {
    const archiveDir = join(tempDir(), 'archive');
    const { log, archiver } = await dayRetainedLog(archiveDir);
    await archiver.pass();
    // Another log (its own first event) may not archive into this directory.
    const other = await dayRetainedLog(archiveDir, testClock(Date.UTC(2026, 0, 1)));
    let refused: unknown;
    await other.archiver.pass().catch((e: unknown) => (refused = e));
    expect(refused).to.be.instanceOf(EventLogError);
    expect((refused as Error).message).to.match(/holds another log's archive/);
    const [first, second] = ArchiveDirectory.open(archiveDir).entries();
    if (!first || !second) throw new Error('expected two files');
    // A file in a schema newer than this readie's: refused by name, not misread.
    const newer = join(tempDir(), second.file);
    const schema = `"schemaVersions":[${EVENT_SCHEMA_VERSION}]`;
    const text = readFileSync(second.path, 'latin1');
    expect(text).to.include(schema);
    writeFileSync(
      newer,
      text.replace(schema, `"schemaVersions":[${EVENT_SCHEMA_VERSION + 1}]`),
      'latin1',
    );
    await ArchiveFile.open(newer).then(
      () => expect.fail('a newer schema opened'),
      (error: unknown) => {
        expect(error).to.be.instanceOf(DamagedArchiveError);
        expect((error as Error).message).to.include(
          `archive file ${second.file} (seq ${second.fromSeq} to ${second.toSeq}) is damaged: its events are written in event schema v${EVENT_SCHEMA_VERSION + 1}`,
        );
      },
    );
    truncateSync(first.path, 200);
    const flipped = readFileSync(second.path);
    flipped.writeUInt8((flipped.at(-5) ?? 0) ^ 0xff, flipped.length - 5);
    writeFileSync(second.path, flipped);
    for (const entry of [first, second]) {
      let error: unknown;
      await ArchiveFile.open(entry.path).catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(DamagedArchiveError);
      expect((error as Error).message).to.include(
        `archive file ${entry.file} (seq ${entry.fromSeq} to ${entry.toSeq}) is damaged`,
      );
    }
    expect(readdirSync(archiveDir)).to.have.length(
      ArchiveDirectory.open(archiveDir).entries().length,
    );
    await Promise.all([log.close(), other.log.close()]);
  });

  it('refuses a block that inflates past the size its header records, before it has inflated', async () => {
    const archiveDir = join(tempDir(), 'archive');
    const { log, archiver } = await dayRetainedLog(archiveDir);
    await archiver.pass();
    await log.close();
    const [entry] = ArchiveDirectory.open(archiveDir).entries();
    if (!entry) throw new Error('expected a file');
    // The header is not under the body's checksum: a crafted one opens, and says 100 bytes.
    const text = readFileSync(entry.path, 'latin1');
    const recorded = /"rawBytes":(\d+)/.exec(text);
    expect(Number(recorded?.[1])).to.be.greaterThan(100);
    const lying = join(tempDir(), entry.file);
    writeFileSync(lying, text.replace(/"rawBytes":\d+/, '"rawBytes":100'), 'latin1');
    const file = await ArchiveFile.open(lying);
    let error: unknown;
    try {
      for await (const _ of file.readBlocks()) void _;
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(DamagedArchiveError);
    expect((error as Error).message).to.equal(
      `archive file ${entry.file} (seq ${entry.fromSeq} to ${entry.toSeq}) is damaged: block 0 inflates past the 100 bytes its header records`,
    );
  });
});
