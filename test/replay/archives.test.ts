/**
 * Replay over a log's archive and its live log, read as one log: every command gives the answer
 * the unarchived log gives; a request is found across them, starting at the archive file that
 * names it; one archive file replays alone (it starts at a snapshot); every fixture archived
 * replays as its expected file says; a damaged or missing file is refused by name and seq range,
 * or skipped with --skip-damaged; another log's archive is refused.
 */
import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  ArchiveFile,
  ArchiveWriter,
  encodeEvent,
  EventLog,
  readJsonl,
  validateEvent,
  type ClusterEvent,
  type StoredEvent,
} from '../../src/events/index.js';
import {
  clusterProjection,
  fold,
  stateToJson,
  type ClusterState,
} from '../../src/projections/index.js';
import { exportCommand } from '../../replay/commands/export.js';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { openLogSource, type OpenOptions } from '../../replay/io/log-source.js';
import {
  appendHistory,
  archivedCluster,
  archiverFor,
  HOUR,
  rewrittenArchive,
  testClock,
} from '../support/archive.js';
import { readEvents, replayCli, ROOT, runLines } from '../support/replay.js';
import { placed, requested } from '../support/events.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** Every event of `paths` read as one log. */
async function read(paths: string[], options: OpenOptions = {}): Promise<ClusterEvent[]> {
  const source = await openLogSource(paths, options);
  const events: ClusterEvent[] = [];
  try {
    for await (const event of source.events()) events.push(event);
  } finally {
    await source.close();
  }
  return events;
}

describe('replay over an archive and the live log', function () {
  this.timeout(120_000);
  let cluster: { log: string; archive: string; full: string };
  before(async function () {
    this.timeout(120_000);
    cluster = await archivedCluster(21);
  });
  after(cleanTempDirs);

  it('verify, run, state and export give the answers of the unarchived log', async () => {
    const files = ArchiveDirectory.open(cluster.archive).entries();
    expect(files.length, 'archived in several files').to.be.at.least(3);
    const whole = replayCli('verify', cluster.full);
    const split = replayCli('verify', cluster.archive, cluster.log);
    expect(split.status, split.stdout + split.stderr).to.equal(0);
    expect(split.stdout).to.equal(whole.stdout);
    expect(whole.stdout).to.match(/verified: [1-9]\d* recorded decisions/);
    // The live log alone holds only the window; with the archive, every call.
    const runWhole = runLines(readEvents(cluster.full));
    expect(runLines(await read([cluster.archive, cluster.log]))).to.deep.equal(runWhole);
    expect(runLines(await read([cluster.log])).length).to.be.below(runWhole.length);
    const seq = Math.floor(((files[1]?.fromSeq ?? 0) + (files[1]?.toSeq ?? 0)) / 2);
    const state = replayCli('state', '--json', '--at', String(seq), cluster.archive, cluster.log);
    expect(state.status, state.stderr).to.equal(0);
    expect(state.stdout).to.equal(
      `${JSON.stringify(stateToJson(fold(readEvents(cluster.full).filter((e) => e.seq <= seq))))}\n`,
    );
    const back = join(tempDir(), 'back.jsonl');
    expect(await exportCommand([cluster.archive, cluster.log], { output: back })).to.equal(0);
    const original = readFileSync(cluster.full, 'utf8');
    // The same text, then what the archiving appended to the live log after it.
    expect(readFileSync(back, 'utf8').startsWith(original)).to.equal(true);
  });

  it('finds a request across them, from the archive file that names it, explained as in the whole log', () => {
    const files = ArchiveDirectory.open(cluster.archive).entries();
    const second = files[1];
    const request = readEvents(cluster.full).find(
      (e): e is Extract<ClusterEvent, { type: 'CallRequested' }> =>
        e.type === 'CallRequested' && e.seq > (second?.fromSeq ?? 0) + 50,
    );
    if (!request) throw new Error('no request');
    const whole = replayCli('explain', cluster.full, request.requestId);
    const split = replayCli('explain', cluster.archive, cluster.log, request.requestId);
    expect(split.status, split.stderr).to.equal(0);
    expect(split.stdout).to.equal(whole.stdout);
    expect(split.stdout).to.include(request.requestId);
  });

  it('reads a log that starts before an archive file given with it from its own start: every seq once, in order, none lost', async () => {
    // The whole log's text (a JSONL file from seq 1) with the second archive file, which it
    // holds too, given first: before, the file was read first and the log only after it.
    const files = ArchiveDirectory.open(cluster.archive).entries();
    const second = files[1];
    if (!second) throw new Error('no second file');
    const whole = readEvents(cluster.full);
    const both = await read([second.path, cluster.full]);
    expect(both.map((e) => e.seq)).to.deep.equal(whole.map((e) => e.seq));
    const verified = replayCli('verify', second.path, cluster.full);
    expect(verified.status, verified.stderr).to.equal(0);
    expect(verified.stdout).to.equal(replayCli('verify', cluster.full).stdout);
    // A request before the file is found, and a state before it is folded from the log's start.
    const early = whole.find(
      (e): e is Extract<ClusterEvent, { type: 'CallRequested' }> =>
        e.type === 'CallRequested' && e.seq < second.fromSeq,
    );
    if (!early) throw new Error('no request before the second file');
    const explained = replayCli('explain', second.path, cluster.full, early.requestId);
    expect(explained.status, explained.stderr).to.equal(0);
    expect(explained.stdout).to.equal(replayCli('explain', cluster.full, early.requestId).stdout);
    const at = String(second.fromSeq - 10);
    const state = replayCli('state', '--json', '--at', at, second.path, cluster.full);
    expect(state.stdout).to.equal(replayCli('state', '--json', '--at', at, cluster.full).stdout);
    // The first file, the live log and the third: the live log holds the seqs between them.
    const withGap = replayCli(
      'verify',
      (files[0] as { path: string }).path,
      files[2]?.path ?? '',
      cluster.full,
    );
    expect(withGap.status, withGap.stderr).to.equal(0);
  });

  it('replays one archive file alone: a window that starts at an archived snapshot', async () => {
    const files = ArchiveDirectory.open(cluster.archive).entries();
    const file = files[1]?.path as string;
    const source = await openLogSource(file);
    const events: ClusterEvent[] = [];
    for await (const event of source.events()) events.push(event);
    await source.close();
    expect(events[0]?.type).to.equal('Snapshot');
    const alone = replayCli('verify', file);
    expect(alone.status, alone.stdout + alone.stderr).to.equal(0);
    expect(alone.stdout).to.match(/verified: [1-9]\d* recorded decisions/);
  });

  it("a window that starts at a snapshot reports a divergence by the rules version the snapshot records (an incident), not as an unversioned log's", async () => {
    // One archive file, a call in it recorded on another worker than placement's: no
    // RouterStarted in the window, only its snapshot says which rules the log was recorded under.
    const workers = new Set<string>();
    let tampered: number | undefined;
    let rulesVersion: unknown;
    const copy = await rewrittenArchive(cluster.archive, 1, (event) => {
      if (event.type === 'Snapshot') {
        rulesVersion = event.state.rulesVersion;
        for (const id of Object.keys(event.state.workers as object)) workers.add(id);
      }
      if (event.type !== 'CallPlaced' || tampered !== undefined) return event;
      tampered = event.seq;
      return { ...event, workerId: [...workers].find((id) => id !== event.workerId)! };
    });
    expect(tampered, 'a call placed in the file').to.be.a('number');
    expect(rulesVersion, "the snapshot's rules version").to.equal(PLACEMENT_RULES_VERSION);
    const written = ArchiveDirectory.open(copy).entries()[1]!;
    const verified = replayCli('verify', written.path);
    expect(verified.status, verified.stdout + verified.stderr).to.equal(1);
    expect(verified.stdout).to.contain(`DIVERGED at seq ${tampered! - 1}, request`);
    expect(verified.stdout).to.contain(
      `decided by placement rules v${PLACEMENT_RULES_VERSION}, the log's own`,
    );
  });

  it('verifies the archive in two runs with the counts of one, split at any file: the calls placed before the second run starts are answered there', async () => {
    const files = ArchiveDirectory.open(cluster.archive)
      .entries()
      .map((entry) => entry.path);
    const counts = (...paths: string[]) => {
      const verified = replayCli('verify', ...paths);
      expect(verified.status, verified.stdout + verified.stderr).to.equal(0);
      const [, calls, others] =
        /verified: (\d+) recorded decisions.*, and (\d+) other/.exec(verified.stdout) ?? [];
      return [Number(calls), Number(others)];
    };
    const whole = counts(cluster.archive, cluster.log);
    let placedBefore = 0;
    for (let split = 1; split < files.length; split += 1) {
      // Calls placed before the snapshot the second run starts at, not yet answered.
      const [snapshot] = await read([files[split] as string]);
      if (snapshot?.type !== 'Snapshot')
        throw new Error('a file that does not start at a snapshot');
      placedBefore += Object.keys(snapshot.state.reservations as object).length;
      const first = counts(...files.slice(0, split));
      const second = counts(...files.slice(split), cluster.log);
      expect([first[0]! + second[0]!, first[1]! + second[1]!], `split at ${split}`).to.deep.equal(
        whole,
      );
    }
    expect(placedBefore, 'a call placed before a split and answered after it').to.be.above(0);
  });

  it('a fold reading on passes over the snapshot each next file starts at, not one after a gap', async () => {
    const files = ArchiveDirectory.open(cluster.archive).entries();
    const folded = async (paths: string[], options: OpenOptions = {}) => {
      const source = await openLogSource(paths, options);
      const events: ClusterEvent[] = [];
      for await (const batch of source.batches(0, undefined, true)) events.push(...batch);
      await source.close();
      return events;
    };
    const events = await folded([cluster.archive, cluster.log]);
    // Every seq once, in order, but the snapshots after the first event (and after the whole
    // text, what the archiving appended).
    const all = readEvents(cluster.full);
    const last = all.at(-1)?.seq ?? 0;
    expect(events.filter((e) => e.seq <= last).map((e) => e.seq)).to.deep.equal(
      all.filter((e, i) => i === 0 || e.type !== 'Snapshot').map((e) => e.seq),
    );
    for (const file of files.slice(1)) {
      expect(all.find((e) => e.seq === file.fromSeq)?.type).to.equal('Snapshot');
      expect(events.some((e) => e.seq === file.fromSeq)).to.equal(false);
    }
    // After a file missing from the middle, the next starts the fold again from its snapshot.
    const copy = tempDir('gap-');
    const missing = files[1];
    const after = files[2];
    if (!missing || !after) throw new Error('fewer than three files');
    for (const entry of files) {
      if (entry !== missing) writeFileSync(join(copy, entry.file), readFileSync(entry.path));
    }
    const resumed = await folded([copy, cluster.log], { skipDamaged: true, warn: () => undefined });
    expect(resumed.find((e) => e.seq === after.fromSeq)?.type).to.equal('Snapshot');
    expect(resumed.some((e) => e.seq >= missing.fromSeq && e.seq <= missing.toSeq)).to.equal(false);
  });

  it('archives every fixture and replays it as its expected file says', async () => {
    const fixtures = join(ROOT, 'fixtures');
    const names = readdirSync(fixtures).filter(
      (name) => name.endsWith('.jsonl') && !name.endsWith('.expected.jsonl'),
    );
    const dir = tempDir('fixture-archives-');
    for (const name of names) {
      const stored: StoredEvent[] = [];
      for await (const line of readJsonl(join(fixtures, name))) stored.push(line);
      const first = stored[0]?.event as ClusterEvent;
      const writer = new ArchiveWriter({
        id: 'fixture',
        seq: first.seq,
        at: first.at,
        routerId: null,
        stream: null,
      });
      for (const line of stored) writer.add(line);
      const written = await writer.write(dir);
      // Most were recorded in the v1 vocabulary (read through the upcaster); later ones in v2.
      const started = stored.find((line) => line.event.type === 'RouterStarted')?.event;
      const schema = started?.type === 'RouterStarted' ? (started.schemaVersion ?? 1) : 1;
      expect((await ArchiveFile.open(written.path)).header.schemaVersions, name).to.deep.equal([
        schema,
      ]);
      const source = await openLogSource(written.path);
      const events: ClusterEvent[] = [];
      for await (const stored of source.stored()) events.push(stored.event);
      await source.close();
      const expected = readFileSync(
        join(fixtures, name.replace(/\.jsonl$/, '.expected.jsonl')),
        'utf8',
      )
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as unknown);
      expect(runLines(events), name).to.deep.equal(expected);
      rmSync(written.path);
    }
    // And one through the real command, from its archive file alone.
    const name = 'session-pin-and-reuse.jsonl';
    const stored: StoredEvent[] = [];
    for await (const line of readJsonl(join(fixtures, name))) stored.push(line);
    const first = stored[0]?.event as ClusterEvent;
    const writer = new ArchiveWriter({
      id: 'fixture',
      seq: first.seq,
      at: first.at,
      routerId: null,
      stream: null,
    });
    for (const line of stored) writer.add(line);
    const written = await writer.write(dir);
    const verified = replayCli('verify', written.path);
    expect(verified.status, verified.stdout + verified.stderr).to.equal(0);
    const back = join(dir, 'back.jsonl');
    expect(replayCli('export', written.path, '-o', back).status).to.equal(0);
    expect(readFileSync(back, 'utf8')).to.equal(readFileSync(join(fixtures, name), 'utf8'));
  });

  it('with --skip-damaged, goes on after a passed-over file from the snapshot that ends the gap: a call placed again in the gap is answered where that snapshot places it', async () => {
    // A session call placed on a-down (file A), its dial failed and the call placed again on b
    // (file B), then answered on b and its session pinned there (file C); each file starts at a
    // snapshot, the first at the log's start.
    const header = readEvents(join(ROOT, 'fixtures', 'dial-failure-places-again.jsonl')).slice(
      0,
      5,
    );
    const placedOn = (workerId: string) =>
      placed('r1', workerId, { sessionId: 's1', checkpointId: 'checkpoint_0' });
    const body: (Record<string, unknown> | 'snapshot')[] = [
      ...header.map(({ seq: _seq, at: _at, ...event }) => event),
      { cause: 'call:r1', ...requested('r1', { sessionId: 's1' }) },
      { cause: 'call:r1', ...placedOn('a-down') },
      'snapshot',
      {
        cause: 'dial:r1',
        type: 'CallDialFailed',
        requestId: 'r1',
        workerId: 'a-down',
        error: 'connect ECONNREFUSED',
      },
      {
        cause: 'dial:r1',
        type: 'WorkerProbeFailed',
        workerId: 'a-down',
        consecutive: 1,
        error: 'the stream of a call could not be opened: connect ECONNREFUSED',
      },
      { cause: 'dial:r1', ...placedOn('b') },
      'snapshot',
      {
        cause: 'answer:r1',
        type: 'CallBound',
        requestId: 'r1',
        containerId: 'c-s1',
        checkpointId: 'checkpoint_0',
      },
      {
        cause: 'answer:r1',
        type: 'SessionPinned',
        sessionId: 's1',
        workerId: 'b',
        containerId: 'c-s1',
        requestId: 'r1',
        checkpointId: 'checkpoint_0',
      },
      { cause: 'end:r1', type: 'CallFinished', requestId: 'r1', ok: true, code: null },
    ];
    const events: ClusterEvent[] = [];
    body.forEach((item, i) => {
      const seq = i + 1;
      const at = new Date(Date.UTC(2026, 10, 30, 10, 0, seq)).toISOString();
      events.push(
        validateEvent(
          item === 'snapshot'
            ? {
                seq,
                at,
                cause: null,
                type: 'Snapshot',
                schemaVersion: 2,
                state: stateToJson(fold(events)),
              }
            : { seq, at, ...item },
        ),
      );
    });
    const dir = tempDir('gap-');
    const starts = events.flatMap((event, i) => (event.type === 'Snapshot' ? [i] : []));
    const files: string[] = [];
    for (const [from, to] of [
      [0, starts[0]],
      [starts[0], starts[1]],
      [starts[1], events.length],
    ]) {
      const writer = new ArchiveWriter({
        id: 'gap',
        seq: 1,
        at: events[0]!.at,
        routerId: null,
        stream: null,
      });
      for (const event of events.slice(from, to)) writer.add({ event, text: encodeEvent(event) });
      files.push((await writer.write(dir)).path);
    }
    const middle = ArchiveDirectory.open(dir).entries()[1]!;
    expect(replayCli('verify', dir).status).to.equal(0);
    const bytes = readFileSync(middle.path);
    bytes.writeUInt8((bytes.at(-3) ?? 0) ^ 0x5a, bytes.length - 3);
    writeFileSync(middle.path, bytes);
    const damaged = replayCli('verify', '--skip-damaged', dir);
    expect(damaged.status, damaged.stdout + damaged.stderr).to.equal(0);
    expect(damaged.stderr).to.contain(
      `replay: skipping seq ${middle.fromSeq} to ${middle.toSeq}: no undamaged file given holds them\n`,
    );
    rmSync(middle.path);
    const missing = replayCli('verify', '--skip-damaged', dir);
    expect(missing.status, missing.stdout + missing.stderr).to.equal(0);
    expect(missing.stdout).to.equal(damaged.stdout);
  });

  it('refuses a damaged or missing file by name and seq range, or skips it with --skip-damaged', async () => {
    const copy = tempDir('damaged-');
    const files = ArchiveDirectory.open(cluster.archive).entries();
    for (const entry of files) writeFileSync(join(copy, entry.file), readFileSync(entry.path));
    const damaged = files[1];
    if (!damaged) throw new Error('no second file');
    const bytes = readFileSync(join(copy, damaged.file));
    bytes.writeUInt8((bytes.at(-10) ?? 0) ^ 0x5a, bytes.length - 10);
    writeFileSync(join(copy, damaged.file), bytes);
    const refused = replayCli('verify', copy, cluster.log);
    expect(refused.status, refused.stdout + refused.stderr).to.equal(2);
    expect(refused.stderr).to.equal(
      `replay: archive file ${damaged.file} (seq ${damaged.fromSeq} to ${damaged.toSeq}) is damaged: its body fails its SHA-256\n`,
    );
    const skipped = replayCli('verify', '--skip-damaged', copy, cluster.log);
    expect(skipped.status, skipped.stdout + skipped.stderr).to.equal(0);
    expect(skipped.stderr).to.include(
      `skipping archive file ${damaged.file} (seq ${damaged.fromSeq} to ${damaged.toSeq})`,
    );
    // The range passed over starts where the damaged file does.
    expect(skipped.stderr).to.include(
      `skipping seq ${damaged.fromSeq} to ${damaged.toSeq}: no undamaged file given holds them\n`,
    );
    // Export across it is refused (a log with a gap is one no reader takes), leaving no file;
    // from the next file's snapshot on, or inside it, it says so.
    const across = join(tempDir(), 'across.jsonl');
    const acrossRun = replayCli('export', '--skip-damaged', copy, cluster.log, '-o', across);
    expect(acrossRun.status, acrossRun.stderr).to.equal(2);
    expect(acrossRun.stderr).to.contain(
      `export would leave out seq ${damaged.fromSeq} to ${damaged.toSeq} (passed over)`,
    );
    expect(existsSync(across)).to.equal(false);
    const after = join(tempDir(), 'after.jsonl');
    const afterRun = replayCli(
      'export',
      '--skip-damaged',
      '--from',
      String(damaged.toSeq + 1),
      copy,
      cluster.log,
      '-o',
      after,
    );
    expect(afterRun.status, afterRun.stderr).to.equal(0);
    expect(replayCli('verify', after).status).to.equal(0);
    const inside = replayCli(
      'export',
      '--skip-damaged',
      '--from',
      String(damaged.fromSeq + 10),
      copy,
      cluster.log,
      '-o',
      join(tempDir(), 'inside.jsonl'),
    );
    expect(inside.status).to.equal(2);
    expect(inside.stderr).to.contain(
      `--from ${damaged.fromSeq + 10}: the events before it could not be read`,
    );
    // A state inside the range passed over cannot be told; one after it can.
    const stateAt = (seq: number) =>
      replayCli('state', '--json', '--skip-damaged', '--at', String(seq), copy, cluster.log);
    const inGap = stateAt(damaged.fromSeq + 10);
    expect(inGap.status, inGap.stdout).to.equal(2);
    expect(inGap.stderr).to.contain(
      `--at ${damaged.fromSeq + 10}: it falls in a range passed over (a damaged or missing archive file)`,
    );
    const afterGap = stateAt(damaged.toSeq + 5);
    expect(afterGap.status, afterGap.stderr).to.equal(0);
    expect(afterGap.stdout).to.contain(`"lastSeq":${damaged.toSeq + 5}`);
    // A file missing from the middle: its range is named.
    rmSync(join(copy, damaged.file));
    const missing = replayCli('verify', copy, cluster.log);
    expect(missing.status).to.equal(2);
    expect(missing.stderr).to.match(
      new RegExp(`no file given holds seq ${damaged.fromSeq} to ${damaged.toSeq}\\b`),
    );
    const warnings: string[] = [];
    const events = await read([copy, cluster.log], {
      skipDamaged: true,
      warn: (line) => warnings.push(line),
    });
    expect(warnings).to.deep.equal([
      `skipping seq ${damaged.fromSeq} to ${damaged.toSeq}: no undamaged file given holds them`,
    ]);
    expect(events.some((e) => e.seq >= damaged.fromSeq && e.seq <= damaged.toSeq)).to.equal(false);
    // Another cluster's archive with this live log.
    const otherArchive = join(tempDir(), 'archive');
    const clock = testClock();
    const other = EventLog.open<ClusterState>(tempDir(), {
      projection: clusterProjection,
      clock: clock.now,
      snapshotEvery: 40,
    });
    await appendHistory(other, clock, { hours: 30 });
    await archiverFor(other, otherArchive, clock, { logRetentionMs: 12 * HOUR }).pass();
    await other.close();
    let mixed: unknown;
    await openLogSource([otherArchive, cluster.log]).catch((error: unknown) => (mixed = error));
    expect((mixed as Error).message).to.match(/is another log's \(first event seq 1 at .*\) than/);
  });
});
