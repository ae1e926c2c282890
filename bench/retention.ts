/**
 * `npm run bench -- retention [--full | --days N]`: 10 days (`--full`: 30) of a 1,000-worker
 * cluster (heartbeats every 10 s, 50 calls a second, every call placed by the core) driven
 * through the real LMDB log with a short retention and the real archiver, the days passing by
 * the log's clock, not by waiting: the cluster's seconds are stamped `stretch` times apart so that
 * 30 days fit in a few million events (its full rate is ~34 million events a day). Beside every
 * figure, a baseline of the same run:
 *
 * - the live log's bytes day by day (`liveLogFlat`: whether it stops growing after the retention
 *   window) beside the same events in a log as readie kept it before (JSON text values, nothing
 *   ever removed), fed every event the cluster appends as it is appended, and after each pass
 *   and each router start what they appended (a router started on it reads its tail back);
 * - the archive's bytes per simulated day, and per day at the cluster's full rate (the bytes an
 *   archived event takes times the events of a full day);
 * - bytes per event on disk before (JSON text) and after (the binary codec), by kind of event, and
 *   the fold rate reading each back (read, decode, validate, fold), alternating rounds;
 * - `routerStartMs`: a real router (in this process) started on the live log at day 3, 10 and the
 *   last, beside one started on the before-format log holding every day (wall clock and CPU);
 * - `verify1MArchiveMs`: `replay verify` of 1,000,000 events from the archive (its first files;
 *   every call and every other decision of the core made again and compared, as the command
 *   does) beside the same events as JSONL (today's verify path), alternating rounds in a process
 *   of its own, as `replay verify` runs (`retention-verify.ts`; a shorter run
 *   archives fewer: `verifyArchiveMs` of what it has, `verify1MArchiveMs` null).
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';
import {
  ArchiveDirectory,
  EventLog,
  type ArchiveEvent,
  LogArchiver,
  encodeEvent,
  type ClusterEvent,
  type StoredEvent,
} from '../src/events/index.js';
import { ByteWriter } from '../src/events/codec/byte-buffers.js';
import { encodeLogValue } from '../src/events/codec/stored-codec.js';
import { decide } from '../src/core/decisions.js';
import { PlacementCaches } from '../src/core/placement/index.js';
import {
  clusterProjection,
  clusterProjectionTelling,
  type ClusterState,
} from '../src/projections/index.js';
import { createLogger, startRouter } from '../src/router/index.js';
import { DEFAULT_CONFIG } from '../src/shared/config.js';
import { openLogSource } from '../replay/io/log-source.js';
import { BUSY_CLUSTER, SimulatedCluster, type ClusterLog } from './retention-cluster.js';
import { compareVerify } from './retention-verify.js';
import { collectGarbage, perSecond, ratio, withTempDir } from './support.js';

const DAY = 86_400_000;
/**
 * Simulated days: 10 by default (about a third of the full run's time), `--full` for 30 (2.4 min
 * alone on two cores, a quarter of an hour beside other runs), `--days N` for any other. Only a run that archives 1,000,000
 * events (the full one) reports `verify1MArchiveMs`.
 */
const DAYS = daysOf(process.argv.slice(2));
const RETENTION_DAYS = 2;
/** Cluster seconds driven per simulated day (the rest of the day is the stretch). */
const TICKS_PER_DAY = Number(process.env.RETENTION_BENCH_TICKS_PER_DAY ?? 150);
const START = Date.UTC(2026, 10, 1);

function daysOf(args: readonly string[]): number {
  if (args.includes('--full')) return 30;
  const at = args.indexOf('--days');
  if (at < 0) return 10;
  const days = Number(args[at + 1]);
  if (!Number.isInteger(days) || days < 6)
    throw new Error('retention: --days takes a whole number, at least 6');
  return days;
}

/**
 * A log as readie kept it before the codec and retention: JSON text values, snapshots indexed.
 * It holds every event of the live log, each seq once and in order (a router started on it reads
 * its tail back, and a gap there is a corrupt log).
 */
class JsonLog {
  readonly root: RootDatabase;
  private readonly events: Database<string, number>;
  private readonly snapshots: Database<boolean, number>;
  count = 0;
  lastSeq = 0;

  constructor(readonly dir: string) {
    this.root = openLmdb({ path: join(dir, 'events.mdb'), maxDbs: 4 });
    this.events = this.root.openDB<string, number>({ name: 'events', encoding: 'string' });
    this.snapshots = this.root.openDB<boolean, number>({ name: 'snapshots', encoding: 'msgpack' });
    void this.root
      .openDB<unknown, string>({ name: 'meta', encoding: 'msgpack' })
      .put('schemaVersion', 1);
  }

  put(event: ClusterEvent, text: string): void {
    if (this.count > 0 && event.seq !== this.lastSeq + 1) {
      throw new Error(
        `retention: the before-format log got seq ${event.seq} after ${this.lastSeq}`,
      );
    }
    void this.events.put(event.seq, text);
    if (event.type === 'Snapshot') void this.snapshots.put(event.seq, true);
    this.count += 1;
    this.lastSeq = event.seq;
  }

  /**
   * Copies what `log` holds past this log's last event: what was appended beside the tee (the
   * archiver's `LogSegmentArchived`, a router's own start).
   */
  catchUp(log: EventLog<ClusterState>): void {
    for (const { event, text } of log.readStored(this.lastSeq + 1)) this.put(event, text);
  }

  pagesBytes(): number {
    return pagesOf(this.events);
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}

function pagesOf(db: Database<unknown, number>): number {
  const stats = db.getStats() as {
    pageSize: number;
    treeBranchPageCount: number;
    treeLeafPageCount: number;
    overflowPages: number;
  };
  return (
    stats.pageSize * (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages)
  );
}

function diskBytes(dir: string): number {
  return statSync(join(dir, 'events.mdb')).blocks * 512;
}

function dirBytes(dir: string): number {
  return readdirSync(dir).reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
}

/** A log handle that also copies every appended event into the before-format log. */
function teeTo(log: EventLog<ClusterState>, json: JsonLog): ClusterLog {
  return {
    get state() {
      return log.state;
    },
    get lastSeq() {
      return log.lastSeq;
    },
    append(input, cause) {
      const result = log.append(input, cause);
      for (const event of result.events) json.put(event, encodeEvent(event));
      return result;
    },
  };
}

/** Which kind of event, for bytes per event. */
function kindOf(event: ClusterEvent): string {
  switch (event.type) {
    case 'WorkerUtilization':
      return 'heartbeat';
    case 'Snapshot':
      return 'snapshot';
    case 'CallRequested':
    case 'CallPlaced':
    case 'CallBound':
    case 'CallFinished':
    case 'SessionPinned':
    case 'ContainerStateChanged':
      return 'call';
    default:
      return 'other';
  }
}

/** Runs the retention benchmark. */
export async function run() {
  const began = performance.now();
  return withTempDir(async (dir) => {
    const liveDir = join(dir, 'live');
    const archiveDir = join(liveDir, 'archive');
    const json = new JsonLog(join(dir, 'before'));
    let now = START;
    const clock = () => now;
    const openLive = (caches: PlacementCaches) =>
      EventLog.open<ClusterState>(liveDir, {
        projection: clusterProjectionTelling(caches),
        clock,
        snapshotEvery: 10_000,
      });
    let caches = new PlacementCaches();
    let live = openLive(caches);
    const policy = {
      logRetentionMs: RETENTION_DAYS * DAY,
      logMaxBytes: 0,
      archiveRetentionMs: 0,
    };
    const archiverOf = (log: EventLog<ClusterState>) =>
      new LogArchiver({
        log,
        archive: ArchiveDirectory.open(archiveDir, { create: true }),
        policy,
        clock,
        record: (event) => log.append(decideRecord(log, event), 'archive').durable,
        inFlightSince: () => {
          let oldest: string | undefined;
          for (const r of log.state.reservations.values()) {
            if (oldest === undefined || r.since < oldest) oldest = r.since;
          }
          return oldest;
        },
      });
    let archiver = archiverOf(live);
    const cluster = new SimulatedCluster(teeTo(live, json), caches);
    cluster.start();
    const step = DAY / TICKS_PER_DAY;
    const days: {
      day: number;
      liveBytes: number;
      liveDisk: number;
      liveEvents: number;
      beforeBytes: number;
      beforeDisk: number;
      archiveBytes: number;
    }[] = [];
    const routerStarts: Record<string, number> = {};
    const routerStartsCpu: Record<string, number> = {};
    let driven = 0;
    let driveMs = 0;
    let archiveMs = 0;
    for (let day = 1; day <= DAYS; day += 1) {
      const driveStart = performance.now();
      for (let tick = 0; tick < TICKS_PER_DAY; tick += 1) {
        now += step;
        driven += cluster.tick();
        if (tick % 25 === 0) await live.flushed();
      }
      await live.flushed();
      await json.root.flushed;
      driveMs += performance.now() - driveStart;
      const archiveStart = performance.now();
      await archiver.pass();
      archiveMs += performance.now() - archiveStart;
      json.catchUp(live);
      days.push({
        day,
        liveBytes: live.liveBytes(),
        liveDisk: diskBytes(liveDir),
        liveEvents: live.lastSeq - (live.firstSeq ?? 1) + 1,
        beforeBytes: json.pagesBytes(),
        beforeDisk: diskBytes(json.dir),
        archiveBytes: dirBytes(archiveDir),
      });
      if (day === 3 || day === 10 || day === DAYS) {
        await live.close();
        const start = await timeRouterStart(liveDir, clock);
        routerStarts[`day${day}`] = start.ms;
        routerStartsCpu[`day${day}`] = start.cpuMs;
        caches = new PlacementCaches();
        live = openLive(caches);
        archiver = archiverOf(live);
        json.catchUp(live);
        cluster.reattach(teeTo(live, json), caches);
      }
    }
    if (json.lastSeq !== live.lastSeq) {
      throw new Error(
        `retention: the before-format log ends at ${json.lastSeq}, the live log at ${live.lastSeq}`,
      );
    }
    await live.close();
    await json.close();
    const baselineStart = await timeRouterStart(json.dir, clock);

    // Flat: after the retention window (and a day to settle), the live log's disk no longer grows.
    const settled = days.filter((d) => d.day >= RETENTION_DAYS + 3);
    const firstSettled = settled[0];
    const lastDay = days.at(-1);
    if (!firstSettled || !lastDay) throw new Error('no days');
    const liveGrowth = ratio(lastDay.liveDisk, firstSettled.liveDisk);
    const beforeGrowth = ratio(lastDay.beforeDisk, firstSettled.beforeDisk);
    const liveLogFlat = Math.max(...settled.map((d) => d.liveDisk)) <= firstSettled.liveDisk * 1.1;

    const archiveEntries = ArchiveDirectory.open(archiveDir).entries();
    const archivedEvents = archiveEntries.reduce((sum, e) => sum + e.toSeq - e.fromSeq + 1, 0);
    const archiveBytes = dirBytes(archiveDir);
    const eventsPerDay = driven / DAYS;
    const fullRateEventsPerDay = Math.round((driven / (DAYS * TICKS_PER_DAY)) * 86_400);

    const encoding = await compareEncodings(
      dir,
      json.dir,
      archiveEntries.map((e) => e.path),
    );
    // In a process of its own, as `replay verify` runs (see retention-verify.ts).
    const verify = await compareVerify(
      dir,
      archiveEntries.map((e) => e.path),
    );

    return {
      simulated: {
        days: DAYS,
        ...BUSY_CLUSTER,
        clusterSecondsPerDay: TICKS_PER_DAY,
        stretch: Math.round(DAY / 1000 / TICKS_PER_DAY),
        eventsDriven: driven,
        eventsPerSimulatedDay: Math.round(eventsPerDay),
        fullRateEventsPerDay,
        logRetentionDays: RETENTION_DAYS,
        note: `the cluster runs at its full shape, each of its seconds stamped ${Math.round(DAY / 1000 / TICKS_PER_DAY)} s apart: ${TICKS_PER_DAY} cluster seconds a simulated day`,
      },
      liveLogFlat,
      liveLog: {
        diskBytesDay30: lastDay.liveDisk,
        diskBytesAfterWindow: firstSettled.liveDisk,
        growthAfterWindow: liveGrowth,
        beforeDiskBytesDay30: lastDay.beforeDisk,
        beforeGrowthSameDays: beforeGrowth,
        ratioToBefore: ratio(lastDay.liveDisk, lastDay.beforeDisk),
        byDay: days.map((d) => ({
          day: d.day,
          liveDisk: d.liveDisk,
          livePages: d.liveBytes,
          liveEvents: d.liveEvents,
          beforeDisk: d.beforeDisk,
          archive: d.archiveBytes,
        })),
      },
      archive: {
        files: archiveEntries.length,
        events: archivedEvents,
        bytes: archiveBytes,
        bytesPerEvent: Math.round((archiveBytes / archivedEvents) * 100) / 100,
        bytesPerSimulatedDay: Math.round(archiveBytes / (archivedEvents / eventsPerDay)),
        bytesPerDayAtFullRate: Math.round((archiveBytes / archivedEvents) * fullRateEventsPerDay),
        beforeBytesPerDayAtFullRate: Math.round(
          (lastDay.beforeDisk / json.count) * fullRateEventsPerDay,
        ),
      },
      ...encoding,
      routerStartMs: routerStarts[`day${DAYS}`],
      routerStartMsByDay: routerStarts,
      routerStartCpuMsByDay: routerStartsCpu,
      routerStartMsBeforeFormatAllDays: baselineStart.ms,
      routerStartCpuMsBeforeFormatAllDays: baselineStart.cpuMs,
      routerStartRatio: ratio(routerStarts[`day${DAYS}`] ?? 0, baselineStart.ms),
      ...verify,
      targets: { routerStartMsAtMost: 2_000, verify1MArchiveMsAtMost: 3_000 },
      timings: {
        driveSeconds: Math.round(driveMs) / 1000,
        drivenEventsPerSecond: perSecond(driven, driveMs),
        archiveSeconds: Math.round(archiveMs) / 1000,
        benchSeconds: Math.round(performance.now() - began) / 1000,
      },
    };
  });
}

/** An archive step as the router records it: a core decision. */
function decideRecord(log: EventLog<ClusterState>, event: ArchiveEvent) {
  return decide('archive', log.state, event).events;
}

/**
 * A real router started on the log in `dir` (its state folded from the newest snapshot): ms by the
 * wall clock, and the CPU this process used meanwhile (which other load inflates less).
 */
async function timeRouterStart(
  dir: string,
  clock: () => number,
): Promise<{ ms: number; cpuMs: number }> {
  collectGarbage();
  const started = performance.now();
  const cpu = process.cpuUsage();
  const router = await startRouter({
    listen: '127.0.0.1:0',
    logDir: dir,
    security: { kind: 'insecure' },
    auth: { mode: 'none' },
    config: { ...DEFAULT_CONFIG, LOG_RETENTION: RETENTION_DAYS * DAY },
    clock,
    logger: createLogger('silent'),
    version: 'bench',
    snapshotEvery: 10_000,
  });
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  await router.close(0);
  return { ms: Math.round(ms), cpuMs: Math.round((used.user + used.system) / 1000) };
}

/**
 * Bytes per event before (JSON text) and after (the binary codec), by kind, over the first
 * 400,000 events; LMDB pages per event for both; and the fold rate reading each back.
 */
async function compareEncodings(dir: string, beforeDir: string, archiveFiles: readonly string[]) {
  const sample: StoredEvent[] = [];
  const source = await openLogSource(archiveFiles);
  for await (const stored of source.stored()) {
    sample.push({ event: stored.event, text: stored.text });
    if (sample.length >= 400_000) break;
  }
  await source.close();
  const bytes: Record<string, { events: number; json: number; binary: number }> = {};
  const scratch = new ByteWriter();
  for (const { event, text } of sample) {
    const kind = kindOf(event);
    const entry = (bytes[kind] ??= { events: 0, json: 0, binary: 0 });
    entry.events += 1;
    entry.json += Buffer.byteLength(text);
    entry.binary += encodeLogValue(event, text, 'exact', scratch).length;
  }
  const perEvent = Object.fromEntries(
    Object.entries(bytes).map(([kind, b]) => [
      kind,
      {
        json: Math.round(b.json / b.events),
        binary: Math.round(b.binary / b.events),
        ratio: ratio(b.binary, b.json),
      },
    ]),
  );
  const all = Object.values(bytes).reduce(
    (sum, b) => ({ json: sum.json + b.json, binary: sum.binary + b.binary }),
    { json: 0, binary: 0 },
  );
  // The same events in two logs: as JSON text (before) and in the codec (after).
  const jsonDir = join(dir, 'sample-json');
  const jsonLog = new JsonLog(jsonDir);
  for (const { event, text } of sample) jsonLog.put(event, text);
  await jsonLog.root.flushed;
  const jsonPages = jsonLog.pagesBytes();
  await jsonLog.close();
  const binaryDir = join(dir, 'sample-binary');
  const binaryLog = EventLog.open(binaryDir);
  for (let i = 0; i < sample.length; i += 10_000) {
    await binaryLog.appendStored(sample.slice(i, i + 10_000)).committed;
  }
  await binaryLog.flushed();
  const binaryPages = binaryLog.liveBytes();
  await binaryLog.close();
  void beforeDir;
  // Fold rate, reading each back: alternate rounds; by the wall clock and by this process's CPU
  // (which the other load on the machine inflates less).
  const foldRate = {
    json: [] as { wall: number; cpu: number }[],
    binary: [] as { wall: number; cpu: number }[],
  };
  for (let round = 0; round < 3; round += 1) {
    for (const [which, logDir] of [
      ['json', jsonDir],
      ['binary', binaryDir],
    ] as const) {
      const reader = EventLog.open(logDir, { readOnly: true });
      collectGarbage();
      const start = performance.now();
      const cpu = process.cpuUsage();
      let state = clusterProjection.initial();
      let count = 0;
      for (const event of reader.read()) {
        state = clusterProjection.apply(state, event);
        count += 1;
      }
      const used = process.cpuUsage(cpu);
      foldRate[which].push({
        wall: perSecond(count, performance.now() - start),
        cpu: perSecond(count, (used.user + used.system) / 1000),
      });
      await reader.close();
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[1] as number;
  const jsonFold = median(foldRate.json.map((r) => r.wall));
  const binaryFold = median(foldRate.binary.map((r) => r.wall));
  const jsonFoldCpu = median(foldRate.json.map((r) => r.cpu));
  const binaryFoldCpu = median(foldRate.binary.map((r) => r.cpu));
  return {
    bytesPerEvent: {
      sampleEvents: sample.length,
      json: Math.round(all.json / sample.length),
      binary: Math.round(all.binary / sample.length),
      ratio: ratio(all.binary, all.json),
      byKind: perEvent,
      lmdbPagesPerEvent: {
        json: Math.round(jsonPages / sample.length),
        binary: Math.round(binaryPages / sample.length),
        ratio: ratio(binaryPages, jsonPages),
      },
    },
    foldEventsPerSecond: {
      json: jsonFold,
      binary: binaryFold,
      ratio: ratio(binaryFold, jsonFold),
      byCpu: { json: jsonFoldCpu, binary: binaryFoldCpu, ratio: ratio(binaryFoldCpu, jsonFoldCpu) },
      rounds: foldRate,
      note: 'read from LMDB, decode, validate, fold (clusterProjection), 400,000 events; the median of three alternating rounds',
    },
    codecHelps: { size: binaryPages < jsonPages, foldSpeed: binaryFoldCpu > jsonFoldCpu },
  };
}
