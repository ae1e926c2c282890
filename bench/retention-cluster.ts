/**
 * A busy cluster driven through a real event log, second by second, as the router would append
 * it: 1,000 workers each reporting its load every 10 s, 50 calls a second placed by the core's own
 * decision (`decide('call')` against the log's folded state, placement's caches as its change
 * sink), each bound to a container, finishing two seconds later and its container reported ready
 * (a session's) or removed. Every append is one decision with its cause, so `replay verify`
 * reproduces every call. The clock is the caller's: it may stretch the cluster's time.
 */
import {
  causeText,
  EVENT_SCHEMA_VERSION,
  type EventLogBackend,
  type NewEvent,
} from '../src/events/index.js';
import { decide } from '../src/core/decisions.js';
import type { PlacementCaches } from '../src/core/placement/index.js';
import { PLACEMENT_RULES_VERSION } from '../src/core/placement/index.js';
import type { ClusterState } from '../src/projections/index.js';
import { demand, GiB, registered } from '../test/support/events.js';
import { CATALOGUE, prng } from '../test/support/synthetic-log.js';

/** The cluster's shape. */
export interface ClusterShape {
  readonly workers: number;
  readonly heartbeatSeconds: number;
  readonly callsPerSecond: number;
  /** How long a call runs, in the cluster's seconds. */
  readonly callSeconds: number;
}

/** The shape of the cluster: 1,000 workers reporting every 10 s, 50 calls a second. */
export const BUSY_CLUSTER: ClusterShape = {
  workers: 1_000,
  heartbeatSeconds: 10,
  callsPerSecond: 50,
  callSeconds: 2,
};

interface Running {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly workerId: string;
  readonly containerId: string;
  readonly reused: boolean;
  readonly checkpointId: string | null;
  readonly endsAt: number;
}

/** What the cluster needs of a log: to append, and the state it folds. */
export type ClusterLog = Pick<EventLogBackend<ClusterState>, 'append' | 'state' | 'lastSeq'>;

/** Drives one cluster through one log. */
export class SimulatedCluster {
  private readonly random = prng(30);
  private readonly running: Running[] = [];
  private second = 0;
  private requests = 0;
  private containers = 0;

  constructor(
    private log: ClusterLog,
    private caches: PlacementCaches,
    private readonly shape: ClusterShape = BUSY_CLUSTER,
  ) {}

  /** Goes on in another handle on the log (reopened after a router started on it). */
  reattach(log: ClusterLog, caches: PlacementCaches): void {
    this.log = log;
    this.caches = caches;
  }

  /** The router's start and every worker's registration. */
  start(): void {
    this.log.append(
      [
        {
          type: 'RouterStarted',
          config: {},
          version: 'bench',
          rulesVersion: PLACEMENT_RULES_VERSION,
          routerId: null,
          takeoverFrom: null,
          schemaVersion: EVENT_SCHEMA_VERSION,
        },
        { type: 'CatalogueLoaded', revision: 'bench', catalogue: CATALOGUE },
      ],
      'start',
    );
    for (let i = 0; i < this.shape.workers; i += 1) {
      this.log.append(
        // An address by IP on a closed loopback port: a router started on the log (the start
        // timings) probes the workers, and a name would be a DNS lookup each, left pending in
        // libuv's thread pool (which LMDB and brotli share) for the rest of the run.
        registered(`w${i}`, {
          address: `127.0.0.1:${20_000 + i}`,
          memoryTotal: 64 * GiB,
          maxContainers: 32,
        }),
        `report:w${i}`,
      );
    }
  }

  /** Appends one second of the cluster (stamped by the log's clock); returns the events appended. */
  tick(): number {
    const before = this.log.lastSeq;
    const { workers, heartbeatSeconds, callsPerSecond } = this.shape;
    const reporting = workers / heartbeatSeconds;
    const offset = (this.second % heartbeatSeconds) * reporting;
    for (let i = 0; i < reporting; i += 1) this.heartbeat(`w${offset + i}`);
    for (let i = 0; i < callsPerSecond; i += 1) this.call();
    this.finishDue();
    this.second += 1;
    return this.log.lastSeq - before;
  }

  private heartbeat(workerId: string): void {
    const worker = this.log.state.workers.get(workerId);
    const event: NewEvent = {
      type: 'WorkerUtilization',
      workerId,
      memoryUsed: Math.floor(this.random() * 24) * GiB + Math.floor(this.random() * 1024) * 1024,
      containerCount: worker?.containers.size ?? 0,
      cpuUsed: Math.round(this.random() * 800) / 100,
      cpuTotal: 8,
      gpuMemoryUsed: null,
      containers: null,
      reportSeq: null,
      standbys: null,
    };
    this.log.append(event, `report:${workerId}`);
  }

  private call(): void {
    this.requests += 1;
    const requestId = `req-${this.requests.toString(36)}-${Math.floor(this.random() * 1e9).toString(36)}`;
    const sessionId = this.random() < 0.2 ? `sess-${Math.floor(this.random() * 500)}` : null;
    const call = {
      requestId,
      sessionId,
      tenantId: null,
      retryOf: null,
      demand: demand({
        memory: this.random() < 0.5 ? null : (1 + Math.floor(this.random() * 4)) * GiB,
        imports: this.random() < 0.4 ? ['numpy'] : null,
      }),
    };
    const made = decide('call', this.log.state, {
      call,
      config: this.log.state.config,
      caches: this.caches,
    });
    this.log.append(made.events, causeText(made.cause));
    const decision = made.placement;
    if (decision.outcome !== 'placed') return;
    let containerId = decision.containerId;
    const reused = containerId !== null;
    if (containerId === null) {
      this.containers += 1;
      containerId = `${decision.workerId}-c${this.containers.toString(36)}`;
      this.log.append(
        {
          type: 'ContainerStateChanged',
          workerId: decision.workerId,
          containerId,
          state: 'busy',
          checkpointId: decision.checkpointId,
          reportSeq: null,
        },
        `report:${decision.workerId}`,
      );
      const bound: NewEvent[] = [
        { type: 'CallBound', requestId, containerId, checkpointId: decision.checkpointId },
      ];
      if (sessionId !== null) {
        bound.push({
          type: 'SessionPinned',
          sessionId,
          workerId: decision.workerId,
          containerId,
          requestId,
          checkpointId: decision.checkpointId,
        });
      }
      this.log.append(bound, `answer:${requestId}`);
    }
    this.running.push({
      requestId,
      sessionId,
      workerId: decision.workerId,
      containerId,
      reused,
      checkpointId: decision.checkpointId,
      endsAt: this.second + this.shape.callSeconds,
    });
  }

  private finishDue(): void {
    while (this.running.length > 0 && (this.running[0] as Running).endsAt <= this.second) {
      const call = this.running.shift() as Running;
      const ok = this.random() < 0.97;
      // The call's end as the router decides it: a failed session call also unpins its session.
      const ended = decide('end', this.log.state, {
        requestId: call.requestId,
        code: ok ? null : 'INTERNAL',
      });
      this.log.append(ended.events, causeText(ended.cause));
      const keep = ok && call.sessionId !== null;
      if (!keep && call.reused) continue;
      this.log.append(
        {
          type: 'ContainerStateChanged',
          workerId: call.workerId,
          containerId: call.containerId,
          state: keep || call.reused ? 'ready' : 'removed',
          checkpointId: call.checkpointId,
          reportSeq: null,
        },
        `report:${call.workerId}`,
      );
    }
  }
}
