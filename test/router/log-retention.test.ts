/**
 * The router's log retention: a router archives what is past `LOG_RETENTION` (into `archive`
 * inside its LMDB log by default), records each file as a core decision, and `readie status` and
 * the metrics show the live log and its archive; bad retention settings and another log's archive
 * directory are refused before anything is recorded.
 */
import { expect } from 'chai';
import { credentials, Metadata } from '@grpc/grpc-js';
import { join } from 'node:path';
import { ArchiveDirectory, EventLog, EventLogError } from '../../src/events/index.js';
import { renderStatus } from '../../src/cli/status/status-sections.js';
import { clusterProjection, type ClusterState } from '../../src/projections/index.js';
import { AdminServiceClient, type StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import { RouterConfigError } from '../../src/core/errors.js';
import { appendHistory, archiverFor, DAY, HOUR, testClock } from '../support/archive.js';
import { readLog, startTestRouter } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

function status(address: string): Promise<StatusResponse> {
  const client = new AdminServiceClient(address, credentials.createInsecure());
  return new Promise<StatusResponse>((resolve, reject) =>
    client.status({ includeExpiredSessions: false }, new Metadata(), (error, answer) =>
      error ? reject(error) : resolve(answer),
    ),
  ).finally(() => client.close());
}

/** A log with two days of a small cluster's history behind it. */
async function oldLog(clock: ReturnType<typeof testClock>): Promise<string> {
  const dir = tempDir();
  const log = EventLog.open<ClusterState>(dir, {
    projection: clusterProjection,
    clock: clock.now,
    snapshotEvery: 40,
  });
  await appendHistory(log, clock, { hours: 48 });
  await log.close();
  return dir;
}

describe('router: log retention', function () {
  this.timeout(30_000);
  afterEach(cleanTempDirs);

  it('archives what is past LOG_RETENTION, and status and metrics show the live log and its archive', async () => {
    const clock = testClock();
    const logDir = await oldLog(clock);
    const test = await startTestRouter({
      logDir,
      clock: clock.now,
      snapshotEvery: 40,
      metrics: '127.0.0.1:0',
      config: { LOG_RETENTION: DAY },
    });
    try {
      const report = await test.router.archiveNow();
      const archived = report?.archived ?? [];
      expect(archived.length).to.be.greaterThan(0);
      const files = ArchiveDirectory.open(join(logDir, 'archive')).entries();
      expect(files.map((f) => f.file)).to.deep.equal(archived.map((e) => e.file));
      const { log } = await status(test.address);
      expect(log?.archiveDir).to.equal(join(logDir, 'archive'));
      expect(log?.archiveFiles).to.equal(files.length);
      expect(log?.archiveFirstSeq).to.equal(1);
      expect(log?.firstSeq).to.equal((files.at(-1)?.toSeq ?? 0) + 1);
      expect(log?.logRetentionMs).to.equal(DAY);
      expect(Date.parse(log?.firstAt ?? '')).to.be.within(
        clock.now() - DAY - 2 * HOUR,
        clock.now() - DAY,
      );
      const page = renderStatus(await status(test.address), clock.now());
      expect(page).to.match(/^Event log$/m);
      expect(page).to.include(
        `archive: ${join(logDir, 'archive')}, ${files.length} file${files.length === 1 ? '' : 's'}, `,
      );
      expect(page).to.match(
        /retention: LOG_RETENTION 1d, LOG_MAX_BYTES none, ARCHIVE_RETENTION 90d/,
      );
      const metrics = await (await fetch(`http://${test.router.metricsAddress}/metrics`)).text();
      expect(metrics).to.match(new RegExp(`^readie_router_archive_files ${files.length}$`, 'm'));
      expect(metrics).to.match(
        new RegExp(`^readie_router_log_archived_total ${files.length}$`, 'm'),
      );
      expect(metrics).to.match(/^readie_router_log_live_bytes [1-9]\d*$/m);
    } finally {
      await test.close();
    }
    const events = readLog(logDir);
    const logged = events.filter((e) => e.type === 'LogSegmentArchived');
    expect(logged.length).to.be.greaterThan(0);
    expect(logged.every((e) => e.cause === 'archive')).to.equal(true);
  });

  it('refuses a retention shorter than the snapshot spacing or the longest call, naming both', async () => {
    for (const config of [
      { LOG_RETENTION: 30 * 60_000 },
      { LOG_RETENTION: 2 * HOUR, SNAPSHOT_INTERVAL: 3 * HOUR },
      { ARCHIVE_RETENTION: DAY },
    ]) {
      let refused: unknown;
      await startTestRouter({ config }).catch((error: unknown) => (refused = error));
      expect(refused, JSON.stringify(config)).to.be.instanceOf(RouterConfigError);
      const message = (refused as Error).message;
      if ('ARCHIVE_RETENTION' in config) {
        expect(message).to.match(/^ARCHIVE_RETENTION 1d is shorter than LOG_RETENTION 7d/);
      } else {
        expect(message).to.match(/SNAPSHOT_INTERVAL \d+h\).*EXECUTION_TIMEOUT 1h\)/);
      }
    }
  });

  it("refuses an archive directory that holds another log's archive, recording nothing", async () => {
    const clock = testClock();
    const otherDir = await oldLog(clock);
    const archiveDir = join(tempDir(), 'archive');
    const other = EventLog.open<ClusterState>(otherDir, { projection: clusterProjection });
    await archiverFor(other, archiveDir, clock, { logRetentionMs: DAY }).pass();
    await other.close();
    const mine = await oldLog(testClock(Date.UTC(2026, 5, 1)));
    const before = readLog(mine).length;
    let refused: unknown;
    await startTestRouter({ logDir: mine, archiveDir }).catch(
      (error: unknown) => (refused = error),
    );
    expect(refused).to.be.instanceOf(EventLogError);
    expect((refused as Error).message).to.match(/holds another log's archive/);
    expect(readLog(mine)).to.have.length(before);
  });
});
