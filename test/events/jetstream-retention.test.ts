/**
 * Retention on a JetStream log (a real three-node cluster): the leader archives every closed
 * segment (its stream's limits drop them later), records each file on the archive subject, and a
 * writer that takes over after a crash between a file and its record adopts that file and goes
 * on where the log says archiving stopped; a router with an archive sets the stream's limits.
 */
import { expect } from 'chai';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  JetStreamEventLog,
  parseJetStreamLocation,
  type ClusterEvent,
} from '../../src/events/index.js';
import { streamNames } from '../../src/events/jetstream/stream-format.js';
import { clusterProjection, type ClusterState } from '../../src/projections/index.js';
import { openLogSource } from '../../replay/io/log-source.js';
import {
  appendHistory,
  archiverFor,
  DAY,
  HOUR,
  liveEvents,
  testClock,
} from '../support/archive.js';
import { useNatsCluster } from '../support/nats.js';
import { startTestRouter } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('log retention (JetStream, a real three-node cluster)', function () {
  this.timeout(90_000);
  const nats = useNatsCluster();
  afterEach(cleanTempDirs);

  async function streamConfig(location: string) {
    const where = parseJetStreamLocation(location);
    const nc = await connect({ servers: [...where.servers] });
    try {
      const jsm = await jetstreamManager(nc);
      return (await jsm.streams.info(where.stream)).config;
    } finally {
      await nc.close();
    }
  }

  it('archives closed segments ahead of the limits; a writer that takes over adopts an unlogged file and resumes', async () => {
    const location = nats.streamLocation('retention');
    const clock = testClock();
    const archiveDir = join(tempDir(), 'archive');
    const open = () =>
      JetStreamEventLog.open<ClusterState>(parseJetStreamLocation(location), {
        projection: clusterProjection,
        clock: clock.now,
        snapshotEvery: 40,
      });
    const first = await open();
    await appendHistory(first, clock, { hours: 30 });
    const before = await liveEvents(first);
    await first.applyLimits({ maxAgeMs: DAY, maxBytes: 64 * 1024 ** 2 });
    const config = await streamConfig(location);
    expect(config.max_age).to.equal(DAY * 1_000_000);
    expect(config.max_bytes).to.equal(64 * 1024 ** 2);
    expect(config.subjects).to.include(streamNames(config.name).archivedSubject);
    // The first writer dies between its third file and the record of it.
    let renamed = 0;
    const crashing = archiverFor(
      first,
      archiveDir,
      clock,
      { logRetentionMs: DAY },
      {
        fileEvents: 200,
        onStep: (step) => {
          if (step === 'renamed' && ++renamed === 3) throw new Error('killed');
        },
      },
    );
    let died: unknown;
    await crashing.pass().catch((error: unknown) => (died = error));
    expect((died as Error).message).to.equal('killed');
    const recorded = await first.archivedThrough();
    await first.close();
    const files = ArchiveDirectory.open(archiveDir).entries();
    expect(files).to.have.length(3);
    expect(recorded).to.equal(files[1]?.toSeq);
    // The next writer: adopts the third file (logging it once) and archives the rest.
    const second = await open();
    await archiverFor(
      second,
      archiveDir,
      clock,
      { logRetentionMs: DAY },
      { fileEvents: 200 },
    ).pass();
    const after = ArchiveDirectory.open(archiveDir).entries();
    expect(after.slice(0, 3).map((f) => f.file)).to.deep.equal(files.map((f) => f.file));
    // What waits is less than a file's worth, closed within half the retention.
    const newest = (await second.snapshotAtOrBefore()) as number;
    const through = after.at(-1)?.toSeq as number;
    expect(newest - 1 - through).to.be.within(0, 199);
    expect(await second.archivedThrough()).to.equal(through);
    const live = await liveEvents(second);
    const logged = live
      .map((s) => s.event)
      .filter(
        (e): e is Extract<ClusterEvent, { type: 'LogSegmentArchived' }> =>
          e.type === 'LogSegmentArchived',
      );
    expect(logged.map((e) => e.file)).to.deep.equal(after.map((f) => f.file));
    expect(logged.every((e) => e.reason === 'stream-limits')).to.equal(true);
    // The stream still holds what it archived (until its limits drop it): read with the
    // archive, each seq once, every event as it was.
    const source = await openLogSource([archiveDir, location]);
    const texts: string[] = [];
    for await (const stored of source.stored()) texts.push(stored.text);
    await source.close();
    expect(texts.slice(0, before.length)).to.deep.equal(before.map((s) => s.text));
    await second.close();
  });

  it('a router with an archive sets its stream limits to the retention; one without archives nothing', async () => {
    const location = nats.streamLocation('router');
    const archiveDir = join(tempDir(), 'archive');
    const withArchive = await startTestRouter({
      logDir: location,
      archiveDir,
      config: { LOG_RETENTION: 2 * DAY, LOG_MAX_BYTES: 1024 ** 3 },
    });
    await withArchive.router.leading;
    const config = await streamConfig(location);
    expect(config.max_age).to.equal(2 * DAY * 1_000_000);
    expect(config.max_bytes).to.equal(1024 ** 3);
    await withArchive.close();
    const bare = nats.streamLocation('bare');
    const without = await startTestRouter({ logDir: bare, config: { LOG_RETENTION: HOUR * 24 } });
    await without.router.leading;
    expect(await without.router.archiveNow()).to.equal(undefined);
    expect((await streamConfig(bare)).max_age).to.equal(0);
    await without.close();
  });
});
