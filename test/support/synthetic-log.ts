/**
 * A deterministic generator of plausible cluster histories: registrations, utilization, calls
 * placed, bound, finished, sessions pinned and expired, probe failures and evictions. Seeded, so
 * property tests can shrink to a seed and benchmarks get the same log every run.
 */
import type { NewEvent } from '../../src/events/index.js';

/** A small, fast, seeded PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What to generate. */
export interface SyntheticLogOptions {
  readonly seed: number;
  /** Stop after at least this many events. */
  readonly events: number;
  readonly workers: number;
  /**
   * Let a session make a second call while one is in flight, so one container holds two calls:
   * what the router never writes (it runs a session's calls one at a time), as a corrupt or
   * hand-made log may. Default false.
   */
  readonly overlappingSessionCalls?: boolean;
  /**
   * Workers also send full reports (numbered load reports listing the containers they hold, some
   * of them leaving out containers the log knows, sessions' among them) and restart (register as
   * a new process while live), with none of the consequences a router appends after those: a log
   * whose sessions end only by what its fold implies. Default false.
   */
  readonly reports?: boolean;
}

const GiB = 1024 ** 3;

/** The catalogue synthetic and simulated logs load (a cpu and a gpu flavor). */
export const CATALOGUE = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy', 'requests'],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        { id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 },
      ],
    },
    gpu: {
      coldStartCost: 2000,
      basePackages: ['numpy', 'torch'],
      checkpoints: [{ id: 'ckpt-torch', modules: ['torch'], restoreCost: 300 }],
    },
  },
  importCosts: { numpy: 150, torch: 2000 },
  defaultImportCost: 100,
};

interface Call {
  requestId: string;
  sessionId: string | null;
  workerId: string;
  containerId: string | null;
}

/** Yields a plausible history of `options.events` events (or a few more), without seq and at. */
export function* syntheticLog(options: SyntheticLogOptions): Generator<NewEvent> {
  const random = prng(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const workerIds = Array.from({ length: options.workers }, (_, i) => `w${i}`);
  const live = new Set<string>();
  const calls: Call[] = [];
  const pins = new Map<string, { workerId: string; containerId: string }>();
  let count = 0;
  let requests = 0;
  let containers = 0;
  // With `reports`: each worker's process and the number of its last report.
  const instances = new Map<string, number>();
  const reportSeqs = new Map<string, number>();
  const emit = function* (event: NewEvent): Generator<NewEvent> {
    count += 1;
    yield event;
  };

  yield* emit({
    type: 'RouterStarted',
    config: { MEMORY_HEADROOM: 0.9 },
    version: 'synthetic',
    rulesVersion: null,
    routerId: null,
    takeoverFrom: null,
    schemaVersion: null,
  });
  yield* emit({ type: 'CatalogueLoaded', revision: 'r1', catalogue: CATALOGUE });
  const register = function* (workerId: string): Generator<NewEvent> {
    live.add(workerId);
    let instanceId: string | null = null;
    if (options.reports) {
      const instance = (instances.get(workerId) ?? 0) + 1;
      instances.set(workerId, instance);
      instanceId = `${workerId}-${instance}`;
    }
    yield* emit({
      type: 'WorkerRegistered',
      workerId,
      address: `10.0.${Math.floor(Number(workerId.slice(1)) / 250)}.${Number(workerId.slice(1)) % 250}:50052`,
      status: random() < 0.02 ? 'error' : 'ready',
      error: null,
      flavor: random() < 0.1 ? 'gpu' : 'cpu',
      memoryTotal: 16 * GiB,
      maxContainers: 8,
      gpuMemoryTotal: null,
      instanceId,
      containers: null,
      reportSeq: null,
    });
  };
  /** A full report of `workerId`: the containers of its calls and sessions, some left out. */
  const fullReport = function* (workerId: string): Generator<NewEvent> {
    const held = new Set<string>();
    for (const call of calls) {
      if (call.workerId === workerId && call.containerId !== null) held.add(call.containerId);
    }
    for (const pin of pins.values()) if (pin.workerId === workerId) held.add(pin.containerId);
    const reportSeq = (reportSeqs.get(workerId) ?? 0) + 1;
    reportSeqs.set(workerId, reportSeq);
    yield* emit({
      type: 'WorkerUtilization',
      workerId,
      memoryUsed: Math.floor(random() * 8 * GiB),
      containerCount: held.size,
      cpuUsed: null,
      cpuTotal: null,
      gpuMemoryUsed: null,
      containers: [...held]
        .filter(() => random() < 0.7)
        .map((containerId) => ({
          containerId,
          state: random() < 0.5 ? 'ready' : 'busy',
          checkpointId: 'checkpoint_0',
        })),
      reportSeq,
      standbys: null,
    });
  };
  for (const workerId of workerIds) yield* register(workerId);

  while (count < options.events) {
    // Keep calls in flight bounded, as a real cluster does: past a few per worker, finish one.
    const roll = calls.length > 2 * options.workers ? 0.75 : random();
    if (roll < 0.2 || live.size === 0) {
      const workerId = pick(workerIds);
      if (!live.has(workerId)) yield* register(workerId);
      else if (options.reports && random() < 0.5) {
        // A new process (its old one's containers are gone), or a full report.
        if (random() < 0.1) yield* register(workerId);
        else yield* fullReport(workerId);
      } else
        yield* emit({
          type: 'WorkerUtilization',
          workerId,
          memoryUsed: Math.floor(random() * 8 * GiB),
          containerCount: Math.floor(random() * 4),
          cpuUsed: Math.round(random() * 400) / 100,
          cpuTotal: 4,
          gpuMemoryUsed: null,
          containers: null,
          reportSeq: null,
          standbys: null,
        });
    } else if (roll < 0.5) {
      requests += 1;
      const requestId = `req-${requests}`;
      // Overlapping calls draw from few sessions, so that they meet often.
      const sessions = options.overlappingSessionCalls ? 6 : 200;
      const drawn = random() < 0.3 ? `sess-${Math.floor(random() * sessions)}` : null;
      // A session runs one call at a time (the router waits for its turn): a session with a call
      // in flight makes no second one, so no container ever holds two calls.
      const busy =
        drawn !== null &&
        !options.overlappingSessionCalls &&
        calls.some((call) => call.sessionId === drawn);
      const sessionId = busy ? null : drawn;
      const pinned = sessionId === null ? undefined : pins.get(sessionId);
      const workerId = pinned?.workerId ?? pick([...live]);
      const memory = random() < 0.5 ? null : Math.floor(random() * 4) * GiB + GiB;
      yield* emit({
        type: 'CallRequested',
        requestId,
        sessionId,
        tenantId: null,
        demand: {
          memory,
          gpuMemory: null,
          gpu: false,
          disableOptimizedExecution: false,
          checkpointId: null,
          imports: random() < 0.3 ? ['numpy'] : [],
          packages: [],
          pinned: null,
        },
        retryOf: null,
        inputs: null,
        function: null,
        turnWaitMs: null,
        deadlineMs: null,
        imageKey: null,
      });
      if (random() < 0.1) {
        yield* emit({
          type: 'CallRejected',
          requestId,
          sessionId,
          code: 'RESOURCE_EXHAUSTED',
          message: 'no worker can accept this request',
          version: null,
          routingRevision: null,
          retryAfterMs: null,
        });
        continue;
      }
      const containerId = pinned?.containerId ?? null;
      calls.push({ requestId, sessionId, workerId, containerId });
      yield* emit({
        type: 'CallPlaced',
        requestId,
        sessionId,
        workerId,
        containerId,
        checkpointId: containerId === null ? 'checkpoint_0' : null,
        packages: [],
        skippedPackages: [],
        memory: memory ?? GiB,
        version: null,
        routingRevision: null,
        coldLoad: false,
      });
      if (pinned && sessionId !== null) {
        yield* emit({
          type: 'SessionPinned',
          sessionId,
          ...pinned,
          requestId: null,
          checkpointId: null,
        });
      }
    } else if (roll < 0.7 && calls.length > 0) {
      const call = pick(calls);
      if (call.containerId !== null) continue;
      containers += 1;
      call.containerId = `${call.workerId}-c${containers}`;
      yield* emit({
        type: 'ContainerStateChanged',
        workerId: call.workerId,
        containerId: call.containerId,
        state: 'busy',
        checkpointId: 'checkpoint_0',
        reportSeq: null,
      });
      yield* emit({
        type: 'CallBound',
        requestId: call.requestId,
        containerId: call.containerId,
        checkpointId: 'checkpoint_0',
      });
      if (call.sessionId !== null && !pins.has(call.sessionId)) {
        pins.set(call.sessionId, { workerId: call.workerId, containerId: call.containerId });
        yield* emit({
          type: 'SessionPinned',
          sessionId: call.sessionId,
          workerId: call.workerId,
          containerId: call.containerId,
          requestId: call.requestId,
          checkpointId: 'checkpoint_0',
        });
      }
    } else if (roll < 0.93 && calls.length > 0) {
      const index = Math.floor(random() * calls.length);
      const call = calls[index] as Call;
      calls.splice(index, 1);
      const ok = random() < 0.9;
      if (random() < 0.03) yield* emit({ type: 'ReservationExpired', requestId: call.requestId });
      else
        yield* emit({
          type: 'CallFinished',
          requestId: call.requestId,
          ok,
          code: ok ? null : 'UNAVAILABLE',
          message: null,
          raised: null,
          inputsRaised: null,
        });
      if (call.containerId !== null) {
        const keep = ok && call.sessionId !== null;
        yield* emit({
          type: 'ContainerStateChanged',
          workerId: call.workerId,
          containerId: call.containerId,
          state: keep ? 'ready' : 'removed',
          checkpointId: 'checkpoint_0',
          reportSeq: null,
        });
        if (
          !keep &&
          call.sessionId !== null &&
          pins.get(call.sessionId)?.containerId === call.containerId
        ) {
          pins.delete(call.sessionId);
          yield* emit({
            type: 'SessionExpired',
            sessionId: call.sessionId,
            reason: 'container_removed',
            causeSeq: null,
          });
        }
      }
    } else if (roll < 0.97) {
      const workerId = pick(workerIds);
      if (live.has(workerId)) {
        yield* emit({
          type: 'WorkerProbeFailed',
          workerId,
          consecutive: 1 + Math.floor(random() * 3),
          error: 'deadline',
        });
      }
    } else if (roll < 0.985 && live.size > 1) {
      const workerId = pick([...live]);
      live.delete(workerId);
      if (random() < 0.3) yield* emit({ type: 'WorkerLeaving', workerId });
      yield* emit({
        type: 'WorkerEvicted',
        workerId,
        reason: pick(['probe', 'ttl', 'left'] as const),
      });
      for (const [sessionId, pin] of pins) {
        if (pin.workerId !== workerId) continue;
        pins.delete(sessionId);
        yield* emit({
          type: 'SessionExpired',
          sessionId,
          reason: 'worker_evicted',
          causeSeq: null,
        });
      }
    } else {
      const workerId = pick(workerIds);
      if (live.has(workerId)) {
        containers += 1;
        yield* emit({
          type: 'ContainerForgotten',
          workerId,
          containerId: `${workerId}-c${containers}`,
          reason: 'idle',
        });
      }
    }
  }
}

/** Stamps events with contiguous seqs (from 1) and one `at` a second apart, as a log would. */
export function* stamped(
  events: Iterable<NewEvent>,
  startMs = Date.UTC(2026, 10, 30, 10),
): Generator<Record<string, unknown>> {
  let seq = 0;
  for (const { type, ...fields } of events) {
    seq += 1;
    yield { seq, at: new Date(startMs + seq * 1000).toISOString(), type, ...fields };
  }
}
