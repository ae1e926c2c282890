/**
 * Placement throughput at 100, 1,000 and 10,000 workers:
 * - with the log: decide, append to an LMDB EventLog (folding into its live state), commit;
 * - without the log: decide and fold into an in-memory state;
 * - baseline: appending the same events to the log without deciding.
 * Calls finish as new ones arrive, so reservations stay at about two per worker.
 */
import type { EventLogBackend, NewEvent } from '../src/events/index.js';
import { EventLog } from '../src/events/index.js';
import type { LogProjection } from '../src/events/projection.js';
import type { NatsCluster } from '../src/cluster/nats-cluster.js';
import { openStreamLog, withNatsCluster } from './nats.js';
import {
  applyInPlace,
  clusterProjection,
  clusterProjectionTelling,
  initialState,
  type ClusterState,
} from '../src/projections/index.js';
import { place, PlacementCaches, type CallToPlace } from '../src/core/placement/index.js';
import { demand, GiB, registered, utilization } from '../test/support/events.js';
import { collectGarbage, perSecond, ratio, withTempDir } from './support.js';

const COMMIT_EVERY = 100;

/**
 * `cpu`: cpu workers and CPU calls only, every worker with room for 64 containers.
 * `mixed`: the walk has work to do: one worker in ten is a gpu worker and one call in ten a GPU
 * call (it starts past every cpu worker), and the emptiest workers (memory in use 0) take two
 * containers at most, so they rank first yet are often full.
 */
type Mix = 'cpu' | 'mixed';

function cluster(workers: number, mix: Mix): NewEvent[] {
  const events: NewEvent[] = [];
  for (let i = 0; i < workers; i += 1) {
    const gpu = mix === 'mixed' && i % 10 === 9;
    events.push(
      registered(`w${i}`, {
        memoryTotal: 64 * GiB,
        maxContainers: mix === 'mixed' && i % 17 === 0 ? 2 : 64,
        flavor: gpu ? 'gpu' : 'cpu',
        gpuMemoryTotal: gpu ? 80 * GiB : null,
      }),
    );
    events.push(
      utilization(`w${i}`, {
        memoryUsed: (i % 17) * GiB,
        cpuUsed: (i % 5) / 2,
        cpuTotal: 8,
        containerCount: i % 4,
      }),
    );
  }
  return events;
}

/** Calls of 1 to 3 GiB; in the mixed workload one in ten is a GPU call. */
function callOf(i: number, mix: Mix): CallToPlace {
  return {
    requestId: `req-${i}`,
    sessionId: null,
    demand: demand({
      memory: ((i % 3) + 1) * GiB,
      gpu: mix === 'mixed' && i % 10 === 0 ? true : null,
      imports: i % 2 === 0 ? ['numpy'] : null,
    }),
  };
}

/** The events one decision appends: the outcome, and the finish of a call placed earlier. */
function withFinish(events: readonly NewEvent[], i: number, workers: number): NewEvent[] {
  const done = i - 2 * workers;
  return done < 0
    ? [...events]
    : [
        ...events,
        {
          type: 'CallFinished',
          requestId: `req-${done}`,
          ok: true,
          code: null,
          message: null,
          raised: null,
          inputsRaised: null,
        },
      ];
}

type Opener = (projection: LogProjection<ClusterState>) => Promise<EventLogBackend<ClusterState>>;

async function withLog(
  workers: number,
  decisions: number,
  mix: Mix,
  opener?: Opener,
): Promise<{ ms: number; appended: NewEvent[][] }> {
  return withTempDir(async (dir) => {
    // As the router does: placement's caches are folded with the log's state.
    const caches = new PlacementCaches();
    const projection = clusterProjectionTelling(caches);
    const log = opener
      ? await opener(projection)
      : EventLog.open<ClusterState>(dir, { projection, snapshotEvery: 0 });
    await log.append(cluster(workers, mix)).committed;
    const appended: NewEvent[][] = [];
    const start = performance.now();
    for (let i = 0; i < decisions; i += 1) {
      const decision = place(log.state, callOf(i, mix), { caches });
      const events = withFinish(decision.events, i, workers);
      const result = log.append(events);
      appended.push(events);
      if (i % COMMIT_EVERY === COMMIT_EVERY - 1) await result.committed;
    }
    await log.flushed();
    const ms = performance.now() - start;
    await log.close();
    return { ms, appended };
  });
}

function withoutLog(workers: number, decisions: number, mix: Mix): number {
  let state = initialState();
  let seq = 0;
  const at = '2026-11-30T10:00:00.000Z';
  const caches = new PlacementCaches();
  const apply = (events: readonly NewEvent[]) => {
    for (const event of events) {
      seq += 1;
      state = applyInPlace(state, { seq, at, cause: null, ...event }, caches);
    }
  };
  apply(cluster(workers, mix));
  const start = performance.now();
  for (let i = 0; i < decisions; i += 1)
    apply(withFinish(place(state, callOf(i, mix), { caches }).events, i, workers));
  return performance.now() - start;
}

async function appendOnly(
  workers: number,
  batches: readonly NewEvent[][],
  mix: Mix,
): Promise<number> {
  return withTempDir(async (dir) => {
    const log = EventLog.open<ClusterState>(dir, {
      projection: clusterProjection,
      snapshotEvery: 0,
    });
    await log.append(cluster(workers, mix)).committed;
    const start = performance.now();
    for (let i = 0; i < batches.length; i += 1) {
      const result = log.append(batches[i]!);
      if (i % COMMIT_EVERY === COMMIT_EVERY - 1) await result.committed;
    }
    await log.flushed();
    const ms = performance.now() - start;
    await log.close();
    return ms;
  });
}

async function measure(workers: number, decisions: number, mix: Mix) {
  // Warm up, then alternate the three and keep each one's best.
  withoutLog(workers, Math.min(decisions, 2_000), mix);
  const logged: number[] = [];
  const bare: number[] = [];
  const baseline: number[] = [];
  for (let round = 0; round < 2; round += 1) {
    collectGarbage();
    const run = await withLog(workers, decisions, mix);
    logged.push(run.ms);
    collectGarbage();
    bare.push(withoutLog(workers, decisions, mix));
    collectGarbage();
    baseline.push(await appendOnly(workers, run.appended, mix));
  }
  const withLogRate = perSecond(decisions, Math.min(...logged));
  const appendOnlyRate = perSecond(decisions, Math.min(...baseline));
  return {
    workload: mix,
    workers,
    decisions,
    decisionsPerSecondWithLog: withLogRate,
    decisionsPerSecondWithoutLog: perSecond(decisions, Math.min(...bare)),
    appendOnlyPerSecond: appendOnlyRate,
    loggedVsAppendOnly: ratio(withLogRate, appendOnlyRate),
    microsecondsPerDecisionWithLog: Math.round((Math.min(...logged) * 1000) / decisions),
  };
}

/** Placements/s with the log on LMDB beside the log on a JetStream R3 stream, alternating. */
async function jetstreamBeside(workers: number, decisions: number) {
  return withNatsCluster(async (nats: NatsCluster) => {
    const opener: Opener = (projection) =>
      openStreamLog<ClusterState>(nats, { projection, snapshotEvery: 0 });
    withoutLog(workers, Math.min(decisions, 2_000), 'cpu');
    const lmdb: number[] = [];
    const jetstream: number[] = [];
    for (let round = 0; round < 2; round += 1) {
      collectGarbage();
      lmdb.push((await withLog(workers, decisions, 'cpu')).ms);
      collectGarbage();
      jetstream.push((await withLog(workers, decisions, 'cpu', opener)).ms);
    }
    const lmdbRate = perSecond(decisions, Math.min(...lmdb));
    const jetstreamRate = perSecond(decisions, Math.min(...jetstream));
    return {
      workers,
      decisions,
      decisionsPerSecondLmdb: lmdbRate,
      decisionsPerSecondJetStream: jetstreamRate,
      ratio: ratio(jetstreamRate, lmdbRate),
      note: 'the same decide + append + fold loop, the log on LMDB vs on a JetStream R3 stream of a three-node nats-server cluster on this machine (one message per decision, pipelined, a commit awaited every 100 decisions); best of two alternating runs',
    };
  });
}

/** Runs the placement benchmark. */
export async function run() {
  const jetstream = await jetstreamBeside(1_000, 10_000);
  const runs = [];
  for (const mix of ['cpu', 'mixed'] as const) {
    for (const [workers, decisions] of [
      [100, 20_000],
      [1_000, 20_000],
      [10_000, 3_000],
    ] as const) {
      runs.push(await measure(workers, decisions, mix));
    }
  }
  const perWorker = runs.map((r) => ({
    workload: r.workload,
    workers: r.workers,
    nanosecondsPerDecisionPerWorker: Math.round(
      (r.microsecondsPerDecisionWithLog * 1000) / r.workers,
    ),
  }));
  return {
    runs,
    scaling: perWorker,
    jetstream,
    targets: {
      jetstreamVsLmdbAtLeast: 0.3,
      decisionsPerSecondWithLogAt1000: 20_000,
      loggedVsAppendOnlyAtLeast: 0.5,
      growth: 'no worse than linear in workers',
    },
    note: `decide + append (one commit awaited every ${COMMIT_EVERY} decisions) + fold into the live state; each decision also appends the CallFinished of a call placed 2 x workers decisions earlier; workload cpu: CPU calls on cpu workers with room; mixed: one worker in ten a gpu worker, one call in ten a GPU call, the emptiest workers hold two containers at most; best of two alternating runs`,
  };
}
