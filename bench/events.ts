/**
 * The event log and the fold:
 * - append throughput in durable batches, beside a raw `lmdb` put loop of the same bytes;
 * - folding 1M events (decode, validate, evolve), beside a raw JSON.parse-and-switch loop.
 */
import { join } from 'node:path';
import { open } from 'lmdb';
import {
  decodeEvent,
  encodeEvent,
  EventLog,
  validateEvent,
  type NewEvent,
} from '../src/events/index.js';
import { clusterProjection, fold, type ClusterState } from '../src/projections/index.js';
import { stamped, syntheticLog } from '../test/support/synthetic-log.js';
import type { EventLogBackend } from '../src/events/index.js';
import { openStreamLog, withNatsCluster } from './nats.js';
import {
  collectGarbage,
  perSecond,
  percentile,
  ratio,
  timed,
  withTempDir,
  median,
} from './support.js';

const BACKEND_EVENTS = 6_000;
const BACKEND_BATCHES = [1, 10, 100];

/** Appends `events` in batches, each awaited: events/s and per-append latency. */
async function appendEach(
  log: EventLogBackend<ClusterState>,
  events: readonly NewEvent[],
  batch: number,
) {
  const latencies: number[] = [];
  const ms = await timed(async () => {
    for (let start = 0; start < events.length; start += batch) {
      const began = performance.now();
      await log.append(events.slice(start, start + batch)).durable;
      latencies.push(performance.now() - began);
    }
  });
  await log.close();
  return {
    eventsPerSecond: perSecond(events.length, ms),
    p50Ms: Math.round(percentile(latencies, 0.5) * 1000) / 1000,
    p99Ms: Math.round(percentile(latencies, 0.99) * 1000) / 1000,
  };
}

/** The LMDB log beside the JetStream log (R3, three local nodes), batch by batch, alternating. */
async function backends(events: readonly NewEvent[]) {
  return withNatsCluster(async (nats) => {
    const runs = [];
    for (const batch of BACKEND_BATCHES) {
      const count = batch === 1 ? events.length / 3 : events.length;
      const slice = events.slice(0, count);
      collectGarbage();
      const lmdb = await withTempDir((dir) =>
        appendEach(
          EventLog.open<ClusterState>(dir, { projection: clusterProjection, snapshotEvery: 0 }),
          slice,
          batch,
        ),
      );
      collectGarbage();
      const jetstream = await appendEach(
        await openStreamLog<ClusterState>(nats, {
          projection: clusterProjection,
          snapshotEvery: 0,
        }),
        slice,
        batch,
      );
      runs.push({
        batch,
        events: count,
        lmdb,
        jetstream,
        ratio: ratio(jetstream.eventsPerSecond, lmdb.eventsPerSecond),
      });
    }
    return {
      runs,
      note: 'EventLog.append awaiting `durable` per batch (one append = one decision = one JetStream message), the LMDB log vs the JetStream log on an R3 stream of a three-node nats-server cluster sharing this machine',
    };
  });
}

const APPEND_EVENTS = 200_000;
const BATCHES = [10, 100, 1_000];
const FOLD_EVENTS = 1_000_000;

async function rawPutMs(texts: readonly string[], batch: number): Promise<number> {
  return withTempDir(async (dir) => {
    const env = open({ path: join(dir, 'raw.mdb'), maxDbs: 4 });
    const db = env.openDB<string, number>({ name: 'events', encoding: 'string' });
    const ms = await timed(async () => {
      for (let start = 0; start < texts.length; start += batch) {
        let last: Promise<boolean> | undefined;
        for (let i = start; i < start + batch && i < texts.length; i += 1) {
          last = db.put(i + 1, texts[i]!);
        }
        await last;
        await env.flushed;
      }
    });
    await env.close();
    return ms;
  });
}

async function eventLogAppendMs(events: readonly NewEvent[], batch: number): Promise<number> {
  return withTempDir(async (dir) => {
    const eventLog = EventLog.open<ClusterState>(dir, {
      projection: clusterProjection,
      snapshotEvery: 0,
    });
    const ms = await timed(async () => {
      for (let start = 0; start < events.length; start += batch) {
        await eventLog.append(events.slice(start, start + batch)).durable;
      }
    });
    await eventLog.close();
    return ms;
  });
}

async function appendThroughput(events: readonly NewEvent[], batch: number) {
  const texts = [...stamped(events)].map((raw) => encodeEvent(validateEvent(raw)));
  // Alternate the two and keep each one's median: this machine's speed drifts, and JIT warm-up
  // and garbage collection should hit both alike.
  const raws: number[] = [];
  const logs: number[] = [];
  for (let round = 0; round < 3; round += 1) {
    collectGarbage();
    raws.push(await rawPutMs(texts, batch));
    collectGarbage();
    logs.push(await eventLogAppendMs(events, batch));
  }
  const rawRate = perSecond(events.length, median(raws));
  const logRate = perSecond(events.length, median(logs));
  return {
    batch,
    events: events.length,
    eventLogEventsPerSecond: logRate,
    rawLmdbPutEventsPerSecond: rawRate,
    ratio: ratio(logRate, rawRate),
  };
}

function parseAndSwitchMs(lines: readonly string[]): number {
  let checksum = 0;
  const start = performance.now();
  for (const line of lines) {
    const event = JSON.parse(line) as { type: string; seq: number };
    switch (event.type) {
      case 'CallPlaced':
      case 'CallFinished':
        checksum += event.seq;
        break;
      default:
        checksum -= 1;
    }
  }
  const ms = performance.now() - start;
  if (checksum === 0.5) throw new Error('unreachable: keeps the loop from being optimized away');
  return ms;
}

function foldMs(lines: readonly string[]): { ms: number; state: ClusterState } {
  const start = performance.now();
  const state = fold(
    (function* () {
      for (const line of lines) yield decodeEvent(line);
    })(),
  );
  return { ms: performance.now() - start, state };
}

function foldThroughput(lines: readonly string[]) {
  const baselines: number[] = [];
  const folds: number[] = [];
  let state: ClusterState | undefined;
  for (let round = 0; round < 2; round += 1) {
    collectGarbage();
    baselines.push(parseAndSwitchMs(lines));
    collectGarbage();
    const result = foldMs(lines);
    folds.push(result.ms);
    state = result.state;
  }
  collectGarbage();
  const decoded = lines.map((line) => decodeEvent(line));
  collectGarbage();
  const evolveStart = performance.now();
  fold(decoded);
  const evolveMs = performance.now() - evolveStart;
  const baselineMs = Math.min(...baselines);
  const fullMs = Math.min(...folds);
  const foldRate = perSecond(lines.length, fullMs);
  const baselineRate = perSecond(lines.length, baselineMs);
  return {
    events: lines.length,
    workers: state?.workers.size ?? 0,
    foldSeconds: Math.round(fullMs) / 1000,
    foldEventsPerSecond: foldRate,
    jsonParseAndSwitchEventsPerSecond: baselineRate,
    ratio: ratio(foldRate, baselineRate),
    foldDecodedSeconds: Math.round(evolveMs) / 1000,
    note: 'fold = parse + validate + normalize + evolve from JSONL text in memory; baseline = JSON.parse + switch on type; best of two alternating runs each; foldDecoded = fold() of events already decoded (the evolve step alone)',
  };
}

/** Runs the events benchmark. */
export async function run() {
  const appendEvents = [...syntheticLog({ seed: 1, events: APPEND_EVENTS, workers: 1000 })].slice(
    0,
    APPEND_EVENTS,
  );
  const append = [];
  for (const batch of BATCHES) {
    const events = appendEvents.slice(0, batch < 100 ? APPEND_EVENTS / 10 : APPEND_EVENTS);
    append.push(await appendThroughput(events, batch));
  }
  const lines = [...stamped(syntheticLog({ seed: 2, events: FOLD_EVENTS, workers: 1000 }))]
    .slice(0, FOLD_EVENTS)
    .map((raw) => JSON.stringify(raw));
  const foldResult = foldThroughput(lines);
  const backendComparison = await backends(appendEvents.slice(0, BACKEND_EVENTS));
  return {
    backends: backendComparison,
    append: {
      runs: append,
      note: 'EventLog.append (stamp, validate, encode, put, fold into the live state) awaiting `durable` per batch, vs lmdb put of the same texts awaiting `flushed` per batch; median of 3 alternating runs',
    },
    fold: foldResult,
    targets: { appendRatioAtLeast: 0.5, foldSecondsAtMost: 3 },
  };
}
